#include "zerotrain/data/cifar10.h"

#include <ATen/ATen.h>

#include <cstring>
#include <string>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"

namespace zerotrain::data {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kClasses = 10;
constexpr int64_t kImageBytes = 3 * 32 * 32;
constexpr int64_t kRecordBytes = 1 + kImageBytes;
constexpr const char* kArchiveFolder = "cifar-10-batches-bin";

std::vector<std::string> batch_files(Split split) {
  if (split == Split::kEval) return {"test_batch.bin"};
  std::vector<std::string> names;
  for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  return names;
}

fs::path find_batches_folder(const fs::path& path) {
  std::error_code ec;
  ZT_CHECK(fs::is_directory(path, ec), IoError, "CIFAR-10: ", path.string(),
           " is not a folder; name the folder that holds data_batch_1.bin .. data_batch_5.bin and test_batch.bin, "
           "or the one that holds ", kArchiveFolder, "/");
  for (const fs::path& folder : {path, path / kArchiveFolder}) {
    if (fs::exists(folder / "data_batch_1.bin", ec) || fs::exists(folder / "test_batch.bin", ec)) return folder;
  }
  throw IoError("CIFAR-10: no batch files in " + path.string() + " nor in " + (path / kArchiveFolder).string() +
                ": expected data_batch_1.bin .. data_batch_5.bin and test_batch.bin from the binary version "
                "(cifar-10-binary.tar.gz, not the Python or MATLAB one)");
}

// The records of one batch file, appended to `records`.
void read_batch_file(const fs::path& file, std::vector<unsigned char>& records) {
  std::error_code ec;
  ZT_CHECK(fs::exists(file, ec), IoError, "CIFAR-10: ", file.string(),
           ": no such file; the binary version has data_batch_1.bin .. data_batch_5.bin and test_batch.bin");
  files::InputFile in(file, {.what = "CIFAR-10 batch file"});
  const int64_t bytes = in.size();
  ZT_CHECK(bytes > 0 && bytes % kRecordBytes == 0, IoError, file.string(), ": ", bytes,
           " bytes, not a positive multiple of the ", kRecordBytes, "-byte CIFAR-10 record (1 label byte + 3x32x32 ",
           "pixels): ", bytes / kRecordBytes, " whole records and ", bytes % kRecordBytes,
           " bytes over; the file is truncated or not the binary version");
  const size_t at = records.size();
  records.resize(at + static_cast<size_t>(bytes));
  in.read_at(0, records.data() + at, bytes);
  for (int64_t r = 0; r < bytes / kRecordBytes; ++r) {
    const unsigned char label = records[at + static_cast<size_t>(r * kRecordBytes)];
    ZT_CHECK(label < kClasses, IoError, file.string(), ": record ", r, " has label ", int{label},
             ", expected 0..9; the file is damaged or not CIFAR-10 (CIFAR-100's binary records are 3074 bytes)");
  }
}

}  // namespace

std::shared_ptr<const ImageDataset> load_cifar10(const fs::path& path, Split split) {
  const fs::path folder = find_batches_folder(path);
  std::vector<unsigned char> records;
  for (const std::string& name : batch_files(split)) read_batch_file(folder / name, records);
  const auto n = static_cast<int64_t>(records.size()) / kRecordBytes;
  at::Tensor images = at::empty({n, 3, 32, 32}, at::kByte);
  at::Tensor labels = at::empty({n}, at::kLong);
  uint8_t* image = images.data_ptr<uint8_t>();
  int64_t* label = labels.data_ptr<int64_t>();
  for (int64_t r = 0; r < n; ++r) {
    const unsigned char* record = records.data() + r * kRecordBytes;
    label[r] = record[0];
    std::memcpy(image + r * kImageBytes, record + 1, kImageBytes);
  }
  return std::make_shared<const ImageDataset>(std::move(images), std::move(labels), kClasses,
                                              std::string("CIFAR-10 ") + split_name(split));
}

}  // namespace zerotrain::data
