// DeepSpeed's csv_monitor layout: in one folder, a file per tag named after the tag with
// '/' and ' ' replaced by '_' ("train/loss" -> train_loss.csv), whose header is "step," and
// the tag's last '/'-separated part ("step,loss", as DeepSpeed writes it), then one
// "step,value" row per logging event. make_csv_writer() is in monitor.h.
#pragma once

#include <string>
#include <string_view>

namespace zerotrain::monitor::csv {

std::string file_name(std::string_view tag);   // "train/loss" -> "train_loss.csv"
std::string header(std::string_view tag);      // "train/loss" -> "step,loss\n"; quoted if needed
// The shortest text that reads back as the same double ("0.1", "3.0000000000000004",
// "nan", "inf").
std::string format_value(double value);

}  // namespace zerotrain::monitor::csv
