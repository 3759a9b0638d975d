// TensorBoard event files, written without TensorFlow or a protobuf library: a file of
// TFRecords, each holding one `tensorflow.Event` message encoded by hand.
//
//   record:  uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes
//            | data | uint32 masked CRC-32C of the data
//   Event    { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary  { repeated Value value = 1; }
//   Value    { string tag = 1; float simple_value = 2; }
//
// The first record names the format (file_version "brain.Event:2"); then one Event per
// logging event, with a Value per scalar. make_tensorboard_writer() is in monitor.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/monitor/monitor.h"

namespace zerotrain::monitor::tensorboard {

inline constexpr std::string_view kFileVersion = "brain.Event:2";

// The Event that opens a file.
std::string encode_file_version_event(double wall_time_s);
// The Event of one logging event. Values are stored as float (simple_value), as
// TensorBoard's own writers do.
std::string encode_scalars_event(double wall_time_s, int64_t step, const std::vector<Scalar>& scalars);
// `data` framed as one TFRecord.
std::string encode_record(std::string_view data);
// "events.out.tfevents.<unix seconds>.<hostname>.<pid>": TensorBoard finds event files by
// the "tfevents" in their name; the pid keeps two runs started in the same second apart.
std::string event_file_name(int64_t unix_s, std::string_view hostname, int64_t pid);

}  // namespace zerotrain::monitor::tensorboard
