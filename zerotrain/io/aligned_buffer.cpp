#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "zerotrain/core/error.h"
#include "zerotrain/io/io_engine.h"

namespace zerotrain::io {

AlignedBuffer::AlignedBuffer(int64_t nbytes) {
  ZT_CHECK(nbytes >= 0, UsageError, "AlignedBuffer of ", nbytes, " bytes: the size must not be negative");
  if (nbytes == 0) return;
  const int64_t rounded = align_up(nbytes);
  // aligned_alloc wants the size a multiple of the alignment, which align_up gives.
  data_ = std::aligned_alloc(static_cast<size_t>(kAlignmentBytes), static_cast<size_t>(rounded));
  if (data_ == nullptr) {
    throw ResourceError(detail::str("cannot allocate ", rounded, " bytes of aligned memory for IO buffers: ",
                                    std::strerror(errno),
                                    " (free memory, or lower the offload buffer_size / buffer_count)"));
  }
  nbytes_ = rounded;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), nbytes_(std::exchange(other.nbytes_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    nbytes_ = std::exchange(other.nbytes_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

}  // namespace zerotrain::io
