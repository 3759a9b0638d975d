// The dataset readers (zerotrain/data/): IDX, CIFAR-10 and text on small files written here,
// the King James Bible and Fashion-MNIST where their Debian packages are installed, and
// open_dataset's specs. Every damaged file is an IoError that names the file.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/data/cifar10.h"
#include "zerotrain/data/idx.h"
#include "zerotrain/data/kjv.h"
#include "zerotrain/data/open.h"
#include "zerotrain/data/text.h"

namespace zerotrain::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// A fresh folder per test, removed after it.
class DataFiles : public ::testing::Test {
 public:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("zt_data_" + std::string(test->test_suite_name()) + "_" + test->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const Bytes& bytes) {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << path;
    return path;
  }
  fs::path write_gz(const std::string& name, const Bytes& bytes) {
    const fs::path path = dir_ / name;
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr) << path;
    EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    EXPECT_EQ(gzclose(f), Z_OK);
    return path;
  }

 protected:
  fs::path dir_;
};

// The message of the IoError `fn` throws; fails the test when it throws nothing or another type.
std::string io_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const IoError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an IoError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

std::string usage_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a UsageError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

#define EXPECT_HAS(text, needle) EXPECT_NE(std::string(text).find(needle), std::string::npos) << (text)

// ------------------------------------------------------------------------------------------
// IDX

Bytes idx(uint32_t magic, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes out;
  auto put32 = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
  };
  put32(magic);
  for (const uint32_t d : dims) put32(d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

constexpr int64_t kN = 3, kH = 2, kW = 3;
const Bytes kLabels = {0, 9, 4};

Bytes pixels() {
  Bytes p;
  for (int i = 0; i < kN * kH * kW; ++i) p.push_back(static_cast<uint8_t>((i * 37 + 5) % 256));
  return p;
}
Bytes image_file() { return idx(0x803, {kN, kH, kW}, pixels()); }
Bytes label_file(const Bytes& labels = kLabels) { return idx(0x801, {static_cast<uint32_t>(labels.size())}, labels); }

void expect_reads_back(const ImageDataset& d) {
  EXPECT_EQ(d.size(), kN);
  EXPECT_EQ(d.info().task, Task::kClassification);
  EXPECT_EQ(d.info().channels, 1);
  EXPECT_EQ(d.info().height, kH);
  EXPECT_EQ(d.info().width, kW);
  EXPECT_EQ(d.info().classes, 10);
  EXPECT_EQ(d.info().description, "digits train (3 images, 1x2x3, 10 classes)");
  const Bytes p = pixels();
  const at::Tensor expected = at::from_blob(const_cast<uint8_t*>(p.data()), {kN, 1, kH, kW}, at::kByte);
  EXPECT_TRUE(at::equal(d.images(), expected));

  const Batch batch = d.get({2, 0});
  ASSERT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{2, 1, kH, kW}));
  EXPECT_EQ(batch.inputs.scalar_type(), at::kFloat);
  const at::Tensor want = expected.index_select(0, at::tensor(std::vector<int64_t>{2, 0})).to(at::kFloat) / 255;
  EXPECT_TRUE(at::equal(batch.inputs, (want - 0.5) / 0.5));
  EXPECT_EQ(batch.targets.scalar_type(), at::kLong);
  EXPECT_EQ(batch.targets[0].item<int64_t>(), 4);
  EXPECT_EQ(batch.targets[1].item<int64_t>(), 0);
  EXPECT_FLOAT_EQ(batch.inputs.min().item<float>(), -1.0f + 2.0f * 5.0f / 255.0f);   // pixel 5 is the smallest
}

TEST_F(DataFiles, IdxReadsRawFilesExactly) {
  const auto d = load_idx_pair(write("images", image_file()), write("labels", label_file()), "digits train");
  expect_reads_back(*d);
}

TEST_F(DataFiles, IdxReadsGzipFiles) {
  const auto d = load_idx_pair(write_gz("images.gz", image_file()), write_gz("labels.gz", label_file()), "digits train");
  expect_reads_back(*d);
}

TEST_F(DataFiles, IdxWrongMagic) {
  const fs::path labels = write("labels", label_file());
  const std::string message = io_error([&] { load_idx_pair(labels, labels, "x"); });
  EXPECT_HAS(message, labels.string());
  EXPECT_HAS(message, "magic number 0x00000801, expected 0x00000803");
  EXPECT_HAS(message, "swapped");
  const fs::path text = write("text", {'h', 'e', 'l', 'l', 'o', '\n'});
  EXPECT_HAS(io_error([&] { read_idx_uint8(text, 1); }), text.string() + ": not a uint8 IDX file");
}

TEST_F(DataFiles, IdxTruncatedPayload) {
  Bytes bytes = image_file();
  bytes.pop_back();
  const fs::path raw = write("images", bytes), gz = write_gz("images.gz", bytes);
  std::string message = io_error([&] { read_idx_uint8(raw, 3); });
  EXPECT_HAS(message, raw.string() + ": truncated: the header says 3 x 2 x 3 = 18 bytes of data after the 16-byte "
                                     "header, the file has 17");
  message = io_error([&] { read_idx_uint8(gz, 3); });
  EXPECT_HAS(message, gz.string() + ": truncated");
  EXPECT_HAS(message, "(decompressed) has 17");
  const fs::path header_only = write("short", {0, 0, 8, 3, 0, 0});
  EXPECT_HAS(io_error([&] { read_idx_uint8(header_only, 3); }), header_only.string() + ": truncated: the header stops");
}

TEST_F(DataFiles, IdxTrailingBytes) {
  Bytes bytes = label_file();
  bytes.push_back(7);
  const fs::path path = write("labels", bytes);
  EXPECT_HAS(io_error([&] { read_idx_uint8(path, 1); }),
             path.string() + ": longer than its header says: 8 + 3 bytes (3) expected, then more bytes follow");
}

TEST_F(DataFiles, IdxCountMismatch) {
  const fs::path images = write("images", image_file()), labels = write("labels", label_file({1, 2}));
  const std::string message = io_error([&] { load_idx_pair(images, labels, "x"); });
  EXPECT_HAS(message, labels.string() + ": 2 labels, but " + images.string() + " has 3 images");
}

TEST_F(DataFiles, IdxLabelOutOfRange) {
  const fs::path images = write("images", image_file()), labels = write("labels", label_file({1, 10, 2}));
  EXPECT_HAS(io_error([&] { load_idx_pair(images, labels, "x"); }),
             labels.string() + ": sample 1 has label 10, expected one of 0..9 (10 classes)");
  EXPECT_EQ(load_idx_pair(images, labels, "x", 11)->info().classes, 11);   // fine with 11 classes
}

TEST_F(DataFiles, IdxDamagedGzipAndMissingFile) {
  // A gzip stream with its deflate data overwritten: zlib's checks (the data, then the CRC) refuse it.
  Bytes big;
  for (int i = 0; i < 4000; ++i) big.push_back(static_cast<uint8_t>(i * i % 251));
  const fs::path gz = write_gz("images.gz", idx(0x803, {40, 10, 10}, big));
  std::fstream f(gz, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(40);
  f.write("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 16);
  f.close();
  EXPECT_HAS(io_error([&] { read_idx_uint8(gz, 3); }), gz.string());
  EXPECT_HAS(io_error([&] { read_idx_uint8(dir_ / "absent", 3); }), (dir_ / "absent").string() + ": no such file");
}

// ------------------------------------------------------------------------------------------
// CIFAR-10

Bytes cifar_records(const Bytes& labels, uint8_t salt) {
  Bytes out;
  for (size_t r = 0; r < labels.size(); ++r) {
    out.push_back(labels[r]);
    for (int i = 0; i < 3072; ++i) out.push_back(static_cast<uint8_t>((i / 1024) * 50 + (i % 7) + r * 3 + salt));
  }
  return out;
}

// Five train batches of 2 records (batch b: labels b and 9 - b), a test batch of 3.
void write_cifar(DataFiles& files, const std::string& folder) {
  for (int b = 1; b <= 5; ++b) {
    files.write(folder + "data_batch_" + std::to_string(b) + ".bin",
          cifar_records({static_cast<uint8_t>(b), static_cast<uint8_t>(9 - b)}, static_cast<uint8_t>(b)));
  }
  files.write(folder + "test_batch.bin", cifar_records({3, 1, 4}, 100));
}

TEST_F(DataFiles, Cifar10ReadsTrainAndTestBatches) {
  write_cifar(*this, "");
  const auto train = load_cifar10(dir_, Split::kTrain);
  EXPECT_EQ(train->size(), 10);
  EXPECT_EQ(train->info().description, "CIFAR-10 train (10 images, 3x32x32, 10 classes)");
  EXPECT_TRUE(at::equal(train->labels(), at::tensor(std::vector<int64_t>{1, 8, 2, 7, 3, 6, 4, 5, 5, 4})))
      << train->labels();
  // Record 1 of data_batch_3 (sample 5): pixel (channel 2, row 0, column 5) is byte 2*1024 + 5.
  EXPECT_EQ(train->images()[5][2][0][5].item<int>(), 2 * 50 + (2048 + 5) % 7 + 1 * 3 + 3);
  const auto test = load_cifar10(dir_, Split::kEval);
  EXPECT_EQ(test->size(), 3);
  EXPECT_EQ(test->labels()[2].item<int64_t>(), 4);
  const Batch batch = test->get({0, 2});
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{2, 3, 32, 32}));
}

TEST_F(DataFiles, Cifar10ParentFolderForm) {
  write_cifar(*this, "cifar-10-batches-bin/");
  EXPECT_EQ(load_cifar10(dir_, Split::kTrain)->size(), 10);
  EXPECT_EQ(load_cifar10(dir_ / "cifar-10-batches-bin", Split::kEval)->size(), 3);
}

TEST_F(DataFiles, Cifar10SizeNotAMultipleOfTheRecord) {
  write_cifar(*this, "");
  Bytes bytes = cifar_records({1, 2}, 0);
  bytes.resize(bytes.size() + 5);
  const fs::path bad = write("data_batch_3.bin", bytes);
  const std::string message = io_error([&] { load_cifar10(dir_, Split::kTrain); });
  EXPECT_HAS(message, bad.string() + ": 6151 bytes, not a positive multiple of the 3073-byte CIFAR-10 record");
  EXPECT_HAS(message, "2 whole records and 5 bytes over");
  const fs::path empty = write("test_batch.bin", {});
  EXPECT_HAS(io_error([&] { load_cifar10(dir_, Split::kEval); }), empty.string() + ": 0 bytes");
}

TEST_F(DataFiles, Cifar10BadLabelAndMissingFiles) {
  write_cifar(*this, "");
  const fs::path bad = write("test_batch.bin", cifar_records({1, 10}, 0));
  EXPECT_HAS(io_error([&] { load_cifar10(dir_, Split::kEval); }), bad.string() + ": record 1 has label 10, expected 0..9");
  fs::remove(dir_ / "data_batch_4.bin");
  EXPECT_HAS(io_error([&] { load_cifar10(dir_, Split::kTrain); }), (dir_ / "data_batch_4.bin").string() + ": no such file");
  fs::create_directories(dir_ / "empty");
  EXPECT_HAS(io_error([&] { load_cifar10(dir_ / "empty", Split::kTrain); }), "no batch files in " + (dir_ / "empty").string());
}

// ------------------------------------------------------------------------------------------
// Text

std::string hundred_bytes() {
  std::string text;
  for (int i = 0; i < 100; ++i) text.push_back(static_cast<char>(32 + (i * 7) % 95));
  return text;
}

std::vector<int64_t> bytes_of(const std::string& text, int64_t begin, int64_t count) {
  std::vector<int64_t> out;
  for (int64_t i = begin; i < begin + count; ++i) out.push_back(static_cast<unsigned char>(text[static_cast<size_t>(i)]));
  return out;
}

std::vector<int64_t> row(const at::Tensor& t, int64_t r) {
  const at::Tensor x = t[r].contiguous();
  return {x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel()};
}

TEST_F(DataFiles, TextBlocksAndTheShift) {
  const std::string text = hundred_bytes();
  const fs::path path = write("corpus.txt", Bytes(text.begin(), text.end()));
  const auto train = load_text_file(path, Split::kTrain, 8);
  // The first 90 bytes train: samples start at 0, 8, ..., 80 and need 9 bytes: (90 - 1) / 8 = 11.
  EXPECT_EQ(train->size(), 11);
  EXPECT_EQ(train->info().task, Task::kLanguageModeling);
  EXPECT_EQ(train->info().vocab_size, 256);
  EXPECT_EQ(train->info().block_size, 8);
  EXPECT_EQ(train->info().description, "text corpus.txt train (90 bytes: 11 blocks of 8 tokens, byte-level vocabulary of 256)");
  const Batch batch = train->get({3, 10});
  ASSERT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(batch.inputs.scalar_type(), at::kLong);
  EXPECT_EQ(row(batch.inputs, 0), bytes_of(text, 24, 8));
  EXPECT_EQ(row(batch.targets, 0), bytes_of(text, 25, 8));
  EXPECT_EQ(row(batch.inputs, 1), bytes_of(text, 80, 8));
  EXPECT_EQ(row(batch.targets, 1), bytes_of(text, 81, 8));   // byte 88, the last one it reads, is still train's
  EXPECT_HAS(usage_error([&] { train->get({11}); }), "sample index 11 is outside [0, 11)");
}

TEST_F(DataFiles, TextSplitIsNinetyTen) {
  const std::string text = hundred_bytes();
  const fs::path path = write("corpus.txt", Bytes(text.begin(), text.end()));
  const auto eval = load_text_file(path, Split::kEval, 4);
  EXPECT_EQ(eval->size(), 2);   // bytes 90..99: (10 - 1) / 4
  const Batch batch = eval->get({0, 1});
  EXPECT_EQ(row(batch.inputs, 0), bytes_of(text, 90, 4));
  EXPECT_EQ(row(batch.targets, 1), bytes_of(text, 95, 4));
  // 101 bytes: eval is the last floor(101 / 10) = 10, train the first 91.
  EXPECT_EQ(make_text_dataset(text + "x", Split::kTrain, 9, "t", "t")->size(), 10);
}

TEST_F(DataFiles, TextTooSmallAndMissing) {
  const fs::path path = write("small.txt", Bytes(30, 'a'));
  std::string message = io_error([&] { load_text_file(path, Split::kEval, 4); });
  EXPECT_HAS(message, path.string() + " is 30 bytes: its eval split (the last 10%, 3 bytes) is too short for one "
                                      "block of 4 tokens, which needs 5 bytes; use a block size of at most 2 or a "
                                      "longer text");
  EXPECT_EQ(load_text_file(path, Split::kTrain, 4)->size(), 6);   // 27 bytes train
  message = io_error([&] { make_text_dataset(std::string(200, 'a'), Split::kEval, 30, "notes.txt", "t"); });
  EXPECT_HAS(message, "notes.txt is 200 bytes: its eval split (the last 10%, 20 bytes)");
  EXPECT_HAS(message, "use a block size of at most 19");
  message = io_error([&] { make_text_dataset(std::string(9, 'a'), Split::kEval, 4, "tiny.txt", "t"); });
  EXPECT_HAS(message, "use a longer text (at least 50 bytes for this block size)");
  EXPECT_HAS(io_error([&] { load_text_file(dir_ / "absent.txt", Split::kTrain, 4); }), "absent.txt: no such file");
}

// A read that fails is an IoError naming the file and the errno, from every reader, never a
// C++ stream exception. /proc/self/mem is a regular file whose reads from byte 0 fail with EIO.
TEST_F(DataFiles, FailedReadsAreIoErrorsNamingTheFile) {
  const std::string eio = "/proc/self/mem: cannot be read at byte 0: Input/output error (EIO)";
  EXPECT_HAS(io_error([&] { load_text_file("/proc/self/mem", Split::kTrain, 4); }), eio);
  EXPECT_HAS(io_error([&] { open_dataset("text:/proc/self/mem", Split::kEval); }), eio);
  EXPECT_HAS(io_error([&] { read_idx_uint8("/proc/self/mem", 3); }), "/proc/self/mem: cannot be read at byte 0");
  fs::create_directories(dir_ / "idx");
  fs::create_symlink("/proc/self/mem", dir_ / "idx" / "t10k-images-idx3-ubyte");
  fs::create_symlink("/proc/self/mem", dir_ / "idx" / "t10k-labels-idx1-ubyte");
  EXPECT_HAS(io_error([&] { open_dataset("mnist:" + (dir_ / "idx").string(), Split::kEval); }),
             "t10k-images-idx3-ubyte: cannot be read at byte 0: Input/output error (EIO)");
}

TEST_F(DataFiles, WhatIsNotARegularFileIsNamed) {
  fs::create_directories(dir_ / "folder.txt");
  EXPECT_HAS(io_error([&] { load_text_file(dir_ / "folder.txt", Split::kTrain, 4); }),
             "folder.txt: is a directory; give the path of a plain text file");
  EXPECT_HAS(io_error([&] { load_text_file("/dev/null", Split::kTrain, 4); }),
             "/dev/null: is a character device; give the path of a plain text file");
  fs::create_directories(dir_ / "cifar" / "test_batch.bin");
  EXPECT_HAS(io_error([&] { load_cifar10(dir_ / "cifar", Split::kEval); }),
             "test_batch.bin: is a directory; give the path of a CIFAR-10 batch file");
  EXPECT_HAS(io_error([&] { read_idx_uint8(dir_, 3); }), dir_.string() + ": is a directory");
}

// ------------------------------------------------------------------------------------------
// The King James Bible

bool bible_installed() {
  if (!fs::exists(fs::path(KjvOptions{}.data_dir) / "bible.data")) return false;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (size_t begin = 0; begin <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', begin), dirs.size());
    if (::access((fs::path(dirs.substr(begin, end - begin)) / "bible").c_str(), X_OK) == 0) return true;
    begin = end + 1;
  }
  return false;
}

TEST(Kjv, WholeBible) {
  if (!bible_installed()) GTEST_SKIP() << "the Debian packages bible-kjv-text and bible-kjv are not installed";
  const std::string text = kjv_text();
  EXPECT_GT(text.size(), 4'000'000u);
  EXPECT_EQ(text.find("Genesis 1\n"), 1u) << text.substr(0, 80);   // after a blank line
  EXPECT_HAS(text.substr(0, 100), "1 In the beginning God created the heaven and the earth.");
  EXPECT_HAS(text.substr(text.size() - 100), "The grace of our Lord Jesus Christ be with you all. Amen.");
  const auto train = load_kjv(Split::kTrain, 256), eval = load_kjv(Split::kEval, 256);
  EXPECT_EQ(train->size(), (static_cast<int64_t>(text.size() - text.size() / 10) - 1) / 256);
  EXPECT_EQ(eval->size(), (static_cast<int64_t>(text.size() / 10) - 1) / 256);
  EXPECT_HAS(train->info().description, "King James Bible train (");
}

TEST_F(DataFiles, KjvMissingProgramOrDataNamesThePackages) {
  write("bible.data", {1, 2, 3});
  KjvOptions options;
  options.program = "zerotrain-test-no-such-bible";
  options.data_dir = dir_.string();
  std::string message = io_error([&] { kjv_text(options); });
  EXPECT_HAS(message, "cannot run `zerotrain-test-no-such-bible`");
  EXPECT_HAS(message, "package bible-kjv)");
  EXPECT_HAS(message, "apt-get install bible-kjv-text bible-kjv");
  EXPECT_HAS(message, "bash scripts/setup.sh");

  options.data_dir = (dir_ / "nothing").string();
  message = io_error([&] { kjv_text(options); });
  EXPECT_HAS(message, "package bible-kjv-text) is missing");
  EXPECT_HAS(message, "apt-get install bible-kjv-text bible-kjv");
}

TEST_F(DataFiles, KjvFailingProgram) {
  write("bible.data", {1, 2, 3});
  KjvOptions options;
  options.data_dir = dir_.string();
  options.program = "false";
  EXPECT_HAS(io_error([&] { kjv_text(options); }), "`false Gen1:1-Rev22:21` failed (exit status 1)");
  options.program = "true";
  EXPECT_HAS(io_error([&] { kjv_text(options); }), "printed only 0 bytes");
}

// ------------------------------------------------------------------------------------------
// open_dataset

TEST(OpenDataset, UnknownSpecsAreUsageErrorsThatListTheSpecs) {
  std::string message = usage_error([] { open_dataset("fashion_mnist", Split::kTrain); });
  EXPECT_HAS(message, "unknown dataset \"fashion_mnist\"; did you mean fashion-mnist?");
  EXPECT_HAS(message, "synthetic, fashion-mnist, mnist:PATH, idx:PATH, cifar10:PATH, text:PATH and kjv");
  EXPECT_HAS(usage_error([] { open_dataset("cifar:/data", Split::kTrain); }), "did you mean cifar10:PATH?");
  message = usage_error([] { open_dataset("imagenet", Split::kTrain); });
  EXPECT_EQ(message.find("did you mean"), std::string::npos) << message;
  EXPECT_HAS(usage_error([] { open_dataset("mnist", Split::kTrain); }), "needs a path: mnist:PATH");
  EXPECT_HAS(usage_error([] { open_dataset("text:", Split::kTrain); }), "needs a path: text:PATH");
  EXPECT_HAS(usage_error([] { open_dataset("kjv:/tmp", Split::kTrain); }), "takes no path");
  EXPECT_HAS(usage_error([] { open_dataset("synthetic", Split::kTrain); }), "built by the Trainer");
}

TEST_F(DataFiles, OpenMnistFolderWithLimit) {
  write("train-images-idx3-ubyte", image_file());
  write("train-labels-idx1-ubyte", label_file());
  write_gz("t10k-images-idx3-ubyte.gz", idx(0x803, {2, kH, kW}, Bytes(2 * kH * kW, 9)));
  write_gz("t10k-labels-idx1-ubyte.gz", label_file({5, 6}));
  const std::string spec = "mnist:" + dir_.string();
  EXPECT_EQ(open_dataset(spec, Split::kTrain)->info().description, "MNIST train (3 images, 1x2x3, 10 classes)");
  EXPECT_EQ(open_dataset(spec, Split::kEval)->size(), 2);
  EXPECT_EQ(open_dataset("idx:" + dir_.string(), Split::kEval)->info().classes, 10);

  OpenOptions options;
  options.limit = 2;
  const auto limited = open_dataset(spec, Split::kTrain, options);
  EXPECT_EQ(limited->size(), 2);
  EXPECT_EQ(limited->info().description, "MNIST train (3 images, 1x2x3, 10 classes), first 2 used");
  EXPECT_EQ(limited->get({1}).targets[0].item<int64_t>(), 9);
  EXPECT_HAS(usage_error([&] { limited->get({2}); }), "sample index 2 is outside [0, 2)");
  options.limit = 50;   // more than there are: all of them
  EXPECT_EQ(open_dataset(spec, Split::kTrain, options)->size(), 3);

  fs::remove(dir_ / "t10k-labels-idx1-ubyte.gz");
  EXPECT_HAS(io_error([&] { open_dataset(spec, Split::kEval); }),
             "no t10k-labels-idx1-ubyte nor t10k-labels-idx1-ubyte.gz in " + dir_.string());
  EXPECT_HAS(io_error([&] { open_dataset("mnist:" + (dir_ / "absent").string(), Split::kEval); }), "does not exist");
}

TEST_F(DataFiles, OpenTextAndCifar10) {
  const std::string text = hundred_bytes();
  write("corpus.txt", Bytes(text.begin(), text.end()));
  write_cifar(*this, "cifar/");
  OpenOptions options;
  options.block_size = 8;
  const auto d = open_dataset("text:" + (dir_ / "corpus.txt").string(), Split::kTrain, options);
  EXPECT_EQ(d->info().block_size, 8);
  EXPECT_EQ(d->size(), 11);
  EXPECT_EQ(open_dataset("cifar10:" + (dir_ / "cifar").string(), Split::kEval)->size(), 3);
}

TEST_F(DataFiles, OpenFashionMnistMissingNamesThePackage) {
  OpenOptions options;
  options.fashion_mnist_dir = (dir_ / "fashion-mnist").string();
  const std::string message = io_error([&] { open_dataset("fashion-mnist", Split::kTrain, options); });
  EXPECT_HAS(message, "dataset-fashion-mnist");
  EXPECT_HAS(message, "bash scripts/setup.sh");
  EXPECT_HAS(message, (dir_ / "fashion-mnist" / "train-images-idx3-ubyte.gz").string());
}

// The real Fashion-MNIST from its Debian package: 6000 train and 1000 test images per class.
TEST(FashionMnist, DebianPackage) {
  if (!fs::exists(fs::path(kFashionMnistDir) / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "the Debian package dataset-fashion-mnist is not installed";
  }
  for (const auto& [split, n] : {std::pair{Split::kTrain, int64_t{60000}}, std::pair{Split::kEval, int64_t{10000}}}) {
    const auto d = open_dataset("fashion-mnist", split);
    ASSERT_EQ(d->size(), n);
    EXPECT_EQ(d->info().channels, 1);
    EXPECT_EQ(d->info().height, 28);
    EXPECT_EQ(d->info().width, 28);
    EXPECT_EQ(d->info().classes, 10);
    const auto& images = dynamic_cast<const ImageDataset&>(*d);
    const at::Tensor counts = at::bincount(images.labels(), {}, 10);
    EXPECT_GE(counts.min().item<int64_t>(), n / 10 * 8 / 10) << counts;
    EXPECT_LE(counts.max().item<int64_t>(), n / 10 * 12 / 10) << counts;
    const Batch batch = d->get({0, n - 1});
    EXPECT_GE(batch.inputs.min().item<float>(), -1.0f);
    EXPECT_LE(batch.inputs.max().item<float>(), 1.0f);
    EXPECT_GT(batch.inputs.max().item<float>(), 0.5f);   // not all background
  }
  EXPECT_EQ(open_dataset("fashion-mnist", Split::kTrain)->info().description,
            "Fashion-MNIST train (60000 images, 1x28x28, 10 classes)");
}

}  // namespace
}  // namespace zerotrain::data
