// The metric writers and the progress bar (zerotrain/monitor/): CRC-32C check values, a
// TensorBoard event file parsed back record by record, the CSV and JSON-lines files, the
// progress bar's text on a terminal and in a log file, and unwritable folders.
#include <gtest/gtest.h>

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "zerotrain/config/config.h"
#include "zerotrain/core/error.h"
#include "zerotrain/monitor/crc32c.h"
#include "zerotrain/monitor/csv_writer.h"
#include "zerotrain/monitor/from_config.h"
#include "zerotrain/monitor/jsonl_writer.h"
#include "zerotrain/monitor/monitor.h"
#include "zerotrain/monitor/progress_bar.h"
#include "zerotrain/monitor/tensorboard_writer.h"

namespace zerotrain::monitor {
namespace {

namespace fs = std::filesystem;

// A fresh folder per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("zerotrain_monitor_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---------------------------------------------------------------------------- CRC-32C

TEST(Crc32c, StandardCheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI), B.4: 32 bytes of zeros, of ones, and counting up.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32c, MaskRotatesAndAddsTheConstant) {
  const uint32_t crc = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

// ---------------------------------------------------------------------------- TensorBoard

// The test's own reader of TFRecords and of the three Event messages, written from the
// format's description rather than from the writer's code.
struct ParsedValue {
  std::string tag;
  float simple_value = NAN;
};
struct ParsedEvent {
  double wall_time = NAN;
  int64_t step = -1;
  std::string file_version;
  std::vector<ParsedValue> values;
};

uint64_t little_endian(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

// One protobuf field: its number, wire type and either its integer or its bytes.
struct Field {
  uint32_t number = 0, type = 0;
  uint64_t integer = 0;
  std::string_view bytes;
};

uint64_t read_varint(std::string_view& in) {
  uint64_t value = 0;
  for (int shift = 0; !in.empty() && shift < 64; shift += 7) {
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return value;
  }
  ADD_FAILURE() << "truncated varint";
  return value;
}

std::vector<Field> read_fields(std::string_view in) {
  std::vector<Field> fields;
  while (!in.empty()) {
    Field f;
    const uint64_t key = read_varint(in);
    f.number = static_cast<uint32_t>(key >> 3);
    f.type = static_cast<uint32_t>(key & 7);
    const size_t fixed = f.type == 1 ? 8 : f.type == 5 ? 4 : 0;
    if (f.type == 0) {
      f.integer = read_varint(in);
    } else if (fixed > 0) {
      if (in.size() < fixed) {
        ADD_FAILURE() << "truncated fixed field";
        return fields;
      }
      f.integer = little_endian(in.substr(0, fixed));
      in.remove_prefix(fixed);
    } else if (f.type == 2) {
      const uint64_t n = read_varint(in);
      if (in.size() < n) {
        ADD_FAILURE() << "truncated bytes field";
        return fields;
      }
      f.bytes = in.substr(0, n);
      in.remove_prefix(n);
    } else {
      ADD_FAILURE() << "wire type " << f.type << " not expected in an Event";
      return fields;
    }
    fields.push_back(f);
  }
  return fields;
}

ParsedEvent parse_event(std::string_view data) {
  ParsedEvent event;
  for (const Field& f : read_fields(data)) {
    if (f.number == 1 && f.type == 1) {
      std::memcpy(&event.wall_time, &f.integer, sizeof(double));
    } else if (f.number == 2 && f.type == 0) {
      event.step = static_cast<int64_t>(f.integer);
    } else if (f.number == 3 && f.type == 2) {
      event.file_version = std::string(f.bytes);
    } else if (f.number == 5 && f.type == 2) {
      for (const Field& v : read_fields(f.bytes)) {
        EXPECT_EQ(v.number, 1u) << "Summary has only `repeated Value value = 1`";
        ParsedValue value;
        for (const Field& field : read_fields(v.bytes)) {
          if (field.number == 1 && field.type == 2) value.tag = std::string(field.bytes);
          if (field.number == 2 && field.type == 5) {
            const auto bits = static_cast<uint32_t>(field.integer);
            std::memcpy(&value.simple_value, &bits, sizeof(float));
          }
        }
        event.values.push_back(value);
      }
    } else {
      ADD_FAILURE() << "unexpected Event field " << f.number << " of wire type " << f.type;
    }
  }
  return event;
}

std::vector<ParsedEvent> read_event_file(const fs::path& path) {
  const std::string file = read_file(path);
  std::string_view in = file;
  std::vector<ParsedEvent> events;
  while (!in.empty()) {
    if (in.size() < 12) {
      ADD_FAILURE() << "truncated record header";
      return events;
    }
    const uint64_t length = little_endian(in.substr(0, 8));
    EXPECT_EQ(little_endian(in.substr(8, 4)), masked_crc32c(in.substr(0, 8))) << "length CRC";
    in.remove_prefix(12);
    if (in.size() < length + 4) {
      ADD_FAILURE() << "truncated record";
      return events;
    }
    const std::string_view data = in.substr(0, length);
    EXPECT_EQ(little_endian(in.substr(length, 4)), masked_crc32c(data)) << "data CRC";
    events.push_back(parse_event(data));
    in.remove_prefix(length + 4);
  }
  return events;
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().find("tfevents") != std::string::npos) files.push_back(entry.path());
  }
  return files;
}

TEST(Tensorboard, EventFileParsesBackRecordByRecord) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "runs" / "job";   // created with its parents
  const double before_s = static_cast<double>(::time(nullptr));
  {
    auto writer = make_tensorboard_writer(dir.string());
    EXPECT_EQ(writer->where(), dir.string());
    writer->write(10, {{"train/loss", 0.5}, {"train/learning_rate", 3e-5}});
    writer->write(20, {{"eval/accuracy", 0.875}});
    writer->flush();
  }
  const auto files = event_files(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename().string().rfind("events.out.tfevents.", 0), 0u) << files[0];

  const auto events = read_event_file(files[0]);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[0].values.empty());
  for (const auto& e : events) {
    EXPECT_GE(e.wall_time, before_s - 1);
    EXPECT_LE(e.wall_time, static_cast<double>(::time(nullptr)) + 1);
  }
  EXPECT_EQ(events[1].step, 10);
  ASSERT_EQ(events[1].values.size(), 2u);
  EXPECT_EQ(events[1].values[0].tag, "train/loss");
  EXPECT_EQ(events[1].values[0].simple_value, 0.5f);
  EXPECT_EQ(events[1].values[1].tag, "train/learning_rate");
  EXPECT_EQ(events[1].values[1].simple_value, 3e-5f);
  EXPECT_EQ(events[2].step, 20);
  ASSERT_EQ(events[2].values.size(), 1u);
  EXPECT_EQ(events[2].values[0].tag, "eval/accuracy");
  EXPECT_EQ(events[2].values[0].simple_value, 0.875f);
}

TEST(Tensorboard, LargeStepsAndLongTagsUseMultiByteVarints) {
  const std::string tag(300, 'x');   // length 300 needs a two-byte varint
  const auto event = parse_event(tensorboard::encode_scalars_event(1.5, int64_t{1} << 40, {{tag, -2.0}}));
  EXPECT_EQ(event.wall_time, 1.5);
  EXPECT_EQ(event.step, int64_t{1} << 40);
  ASSERT_EQ(event.values.size(), 1u);
  EXPECT_EQ(event.values[0].tag, tag);
  EXPECT_EQ(event.values[0].simple_value, -2.0f);
}

TEST(Tensorboard, TwoWritersInOneFolderWriteTwoFiles) {
  TempDir tmp;
  auto a = make_tensorboard_writer(tmp.path().string());
  auto b = make_tensorboard_writer(tmp.path().string());
  a->write(1, {{"train/loss", 1.0}});
  b->write(1, {{"train/loss", 2.0}});
  EXPECT_EQ(event_files(tmp.path()).size(), 2u);
}

// ---------------------------------------------------------------------------- CSV

TEST(Csv, OneFilePerTagWithDeepSpeedsNamesAndHeaders) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "csv";
  {
    auto writer = make_csv_writer(dir.string());
    EXPECT_EQ(writer->where(), dir.string());
    writer->write(1, {{"train/loss", 0.5}, {"train/learning_rate", 0.1 + 0.2}});
    writer->write(2, {{"train/loss", 0.25}, {"eval/exact match", 1e-300}});
    writer->flush();
  }
  EXPECT_EQ(read_file(dir / "train_loss.csv"), "step,loss\n1,0.5\n2,0.25\n");
  EXPECT_EQ(read_file(dir / "train_learning_rate.csv"), "step,learning_rate\n1,0.30000000000000004\n");
  EXPECT_EQ(read_file(dir / "eval_exact_match.csv"), "step,exact match\n2,1e-300\n");
}

TEST(Csv, AResumedRunAppendsUnderTheOldHeader) {
  TempDir tmp;
  make_csv_writer(tmp.path().string())->write(1, {{"train/loss", 2.0}});
  make_csv_writer(tmp.path().string())->write(2, {{"train/loss", 1.0}});
  EXPECT_EQ(read_file(tmp.path() / "train_loss.csv"), "step,loss\n1,2\n2,1\n");
}

TEST(Csv, ValuesRoundTrip) {
  for (const double v : {0.1, 1.0 / 3.0, -2.5e-7, 6.02214076e23, 5e-324}) {
    const std::string text = csv::format_value(v);
    double back = 0;   // from_chars, not stod: stod refuses the subnormal 5e-324 (ERANGE)
    EXPECT_EQ(std::from_chars(text.data(), text.data() + text.size(), back).ec, std::errc()) << text;
    EXPECT_EQ(back, v) << text;
  }
  EXPECT_EQ(csv::format_value(NAN), "nan");
  EXPECT_EQ(csv::file_name("train/grad norm"), "train_grad_norm.csv");
  EXPECT_EQ(csv::header("loss"), "step,loss\n");
  EXPECT_EQ(csv::header("eval/f1, \"macro\""), "step,\"f1, \"\"macro\"\"\"\n");
}

// ---------------------------------------------------------------------------- JSON lines

TEST(Jsonl, OneObjectPerEventStepFirst) {
  TempDir tmp;
  const fs::path path = tmp.path() / "logs" / "metrics.jsonl";
  {
    auto writer = make_jsonl_writer(path.string());
    EXPECT_EQ(writer->where(), path.string());
    writer->write(5, {{"train/loss", 0.75}, {"train/learning_rate", 1e-4}});
    writer->write(10, {{"eval/loss", NAN}});
  }
  EXPECT_EQ(read_file(path),
            "{\"step\":5,\"train/loss\":0.75,\"train/learning_rate\":0.0001}\n"
            "{\"step\":10,\"eval/loss\":null}\n");
  make_jsonl_writer(path.string())->write(15, {{"train/loss", 0.5}});   // a resumed run appends
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2]["step"], 15);
  EXPECT_EQ(lines[2]["train/loss"], 0.5);
}

// ---------------------------------------------------------------------------- Monitor

TEST(Monitor, FansOutToEveryWriter) {
  TempDir tmp;
  Monitor monitor;
  EXPECT_TRUE(monitor.empty());
  monitor.add(make_csv_writer((tmp.path() / "csv").string()));
  monitor.add(make_jsonl_writer((tmp.path() / "m.jsonl").string()));
  EXPECT_FALSE(monitor.empty());
  monitor.write(3, {{"train/loss", 1.5}});
  monitor.write(4, {});   // nothing to log: no empty rows or objects
  monitor.flush();
  EXPECT_EQ(monitor.destinations(), (std::vector<std::string>{(tmp.path() / "csv").string(),
                                                              (tmp.path() / "m.jsonl").string()}));
  EXPECT_EQ(read_file(tmp.path() / "csv" / "train_loss.csv"), "step,loss\n3,1.5\n");
  EXPECT_EQ(read_file(tmp.path() / "m.jsonl"), "{\"step\":3,\"train/loss\":1.5}\n");
}

// An unwritable place, even for root: a folder below a regular file.
TEST(Monitor, UnwritableFolderIsAnIoErrorNamingIt) {
  TempDir tmp;
  const fs::path blocker = tmp.path() / "a_file";
  std::ofstream(blocker) << "x";
  const std::string dir = (blocker / "metrics").string();
  auto expect_io_error = [&](auto make, const std::string& what) {
    try {
      make();
      ADD_FAILURE() << what << ": no error";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << what << ": " << e.what();
    }
  };
  expect_io_error([&] { make_tensorboard_writer(dir); }, "tensorboard");
  expect_io_error([&] { make_csv_writer(dir); }, "csv");
  expect_io_error([&] { make_jsonl_writer(dir + "/metrics.jsonl"); }, "jsonl");
}

// ---------------------------------------------------------------------------- configuration

TEST(FromConfig, DeepSpeedBlocksWriteIntoOutputPathJobName) {
  TempDir tmp;
  const auto config = zerotrain::Config::from_string(
      R"({"train_batch_size": 8,
          "tensorboard": {"enabled": true, "output_path": ")" + (tmp.path() / "tb").string() + R"(", "job_name": "run1"},
          "csv_monitor": {"enabled": true, "output_path": ")" + (tmp.path() / "csv").string() + R"("}})");
  Monitor monitor;
  add_from_config(monitor, config.tensorboard, config.csv_monitor);
  EXPECT_EQ(monitor.destinations(), (std::vector<std::string>{(tmp.path() / "tb" / "run1").string(),
                                                              (tmp.path() / "csv" / "DeepSpeedJobName").string()}));
  monitor.write(1, {{"train/loss", 1.0}});
  EXPECT_EQ(event_files(tmp.path() / "tb" / "run1").size(), 1u);
  EXPECT_TRUE(fs::exists(tmp.path() / "csv" / "DeepSpeedJobName" / "train_loss.csv"));

  config::MonitorConfig defaults;   // output_path "": the job name in the current directory
  EXPECT_EQ(monitor_dir(defaults), fs::path("DeepSpeedJobName"));
  Monitor none;
  add_from_config(none, defaults, defaults);
  EXPECT_TRUE(none.empty());
}

TEST(FromConfig, ReportToNames) {
  TempDir tmp;
  Monitor monitor;
  add_report_to(monitor, {"jsonl", "csv", "tensorboard", "jsonl", "none"}, tmp.path());
  EXPECT_EQ(monitor.destinations(),
            (std::vector<std::string>{(tmp.path() / kJsonlFileName).string(), tmp.path().string(), tmp.path().string()}));
  Monitor all;
  add_report_to(all, {"all"}, tmp.path());
  EXPECT_EQ(all.destinations().size(), 1u);
  Monitor nothing;
  add_report_to(nothing, {"none"}, tmp.path());
  EXPECT_TRUE(nothing.empty());
  EXPECT_THROW(add_report_to(nothing, {"wandb"}, tmp.path()), NotSupported);
  try {
    add_report_to(nothing, {"tensorbord"}, tmp.path());
    ADD_FAILURE() << "a misspelt name was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("tensorbord"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------- progress bar

TEST(ProgressFormat, Durations) {
  EXPECT_EQ(format_duration(0), "00:00");
  EXPECT_EQ(format_duration(42.7), "00:42");
  EXPECT_EQ(format_duration(59 * 60 + 59), "59:59");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(NAN), "?");
  EXPECT_EQ(format_duration(-1), "?");
}

TEST(ProgressFormat, BarsInEighths) {
  EXPECT_EQ(format_bar(0.45, 10), "████▌     ");
  EXPECT_EQ(format_bar(0.0, 3), "   ");
  EXPECT_EQ(format_bar(1.0, 4), "████");
  EXPECT_EQ(format_bar(2.0, 4), "████");   // clamped
  EXPECT_EQ(format_bar(1.0 / 32, 4), "▏   ");
}

TEST(ProgressFormat, WholeLines) {
  ProgressState s;
  s.step = 450;
  s.total_steps = 1000;
  s.elapsed_s = 42;
  s.eta_s = 52;
  s.steps_per_s = 10.6;
  s.epoch = 1.35;
  s.loss = 0.41234;
  s.samples_per_s = 2710.2;
  EXPECT_EQ(format_bar_line(s, 10),
            " 45%|████▌     | 450/1000 [00:42<00:52, 10.6 it/s] epoch 1.35 loss 0.4123 samples/s 2710");
  EXPECT_EQ(format_plain_line(s), "step 450/1000 (45%) epoch 1.35 loss 0.4123 samples/s 2710 elapsed 00:42 eta 00:52");
  s.steps_per_s = 0.25;   // slow steps as seconds per step
  s.loss = NAN;           // unknown: left out
  EXPECT_EQ(format_bar_line(s, 10), " 45%|████▌     | 450/1000 [00:42<00:52, 4.00 s/it] epoch 1.35 samples/s 2710");
}

// A clock the test moves by hand.
struct FakeClock {
  double now_s = 100.0;
  std::function<double()> fn() {
    return [this] { return now_s; };
  }
};

TEST(ProgressBar, TerminalRedrawsInPlaceAtMostTenTimesASecond) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar({.total_steps = 101, .steps_per_epoch = 10, .is_terminal = true, .now_s = clock.fn()}, out);
  bar.update(1, 0.1, 2.0, 100);   // the first step: drawn, no rate yet
  EXPECT_EQ(out.str().find('\r'), 0u);
  EXPECT_NE(out.str().find("[00:00<?, ? it/s]"), std::string::npos) << out.str();
  const size_t after_first = out.str().size();
  clock.now_s += 0.05;
  bar.update(2, 0.2, 1.9, 100);   // 50 ms later: not drawn
  EXPECT_EQ(out.str().size(), after_first);
  clock.now_s = 110.0;            // 10 s after the first step, at step 11: 1 step/s
  bar.update(11, 1.1, 1.0, 100);
  EXPECT_NE(out.str().find("11/101 [00:10<01:30, 1.00 it/s] epoch 1.10 loss 1.0000"), std::string::npos)
      << out.str();
  clock.now_s = 111.0;
  bar.update(12, NAN, 1.0, 100);   // no epoch given: step / steps_per_epoch
  EXPECT_NE(out.str().find("12/101 [00:11<01:29, 1.00 it/s] epoch 1.20 loss"), std::string::npos) << out.str();
  bar.message("saved checkpoint-11");
  const std::string text = out.str();
  // Cleared, printed, drawn again.
  EXPECT_NE(text.find("\r\x1b[Ksaved checkpoint-11\n\r 11%|"), std::string::npos) << text;
  bar.finish();
  EXPECT_EQ(out.str().back(), '\n');
}

TEST(ProgressBar, LogFileGetsPlainLinesOnlyWhenAsked) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar({.total_steps = 100, .is_terminal = false, .now_s = clock.fn()}, out);
  for (int step = 1; step <= 20; ++step) {
    clock.now_s += 0.5;
    bar.update(step, step / 10.0, 1.0 / step, 64);
  }
  EXPECT_EQ(out.str(), "");   // no bar in a log file
  bar.line();
  bar.update(25, NAN);   // no epoch given, no steps_per_epoch: none shown
  bar.line();
  bar.message("evaluating");
  bar.finish();
  EXPECT_EQ(out.str(),
            "step 20/100 (20%) epoch 2.00 loss 0.0500 samples/s 64 elapsed 00:10 eta 00:40\n"
            "step 25/100 (25%) elapsed 00:10 eta 00:29\n"
            "evaluating\n");
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
  EXPECT_EQ(out.str().find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace zerotrain::monitor
