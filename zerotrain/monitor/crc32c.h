// CRC-32C (Castagnoli), the checksum of TensorFlow's record files (TensorBoard's event
// files). A small table-driven implementation: no package on the supported systems provides
// it for C++, and the event files need a few hundred bytes per logging step, not speed.
#pragma once

#include <cstdint>
#include <string_view>

namespace zerotrain::monitor {

// CRC-32C of `data` (reflected polynomial 0x82F63B78, initial value and final xor
// 0xFFFFFFFF): crc32c("123456789") == 0xE3069283.
uint32_t crc32c(std::string_view data);

// The "masked" CRC that TFRecord files store, so that a CRC of data that itself holds CRCs
// does not degrade: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(std::string_view data);

}  // namespace zerotrain::monitor
