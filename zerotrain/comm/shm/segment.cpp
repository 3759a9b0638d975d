#include "zerotrain/comm/shm/segment.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <utility>

#include "zerotrain/core/error.h"

namespace zerotrain::comm::shm {
namespace {

// A one-byte message with room for one descriptor (SCM_RIGHTS), for sending or receiving.
// Not copyable: the header points into the object itself.
struct FdMessage {
  char byte = 'z';
  iovec payload{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr header{};
  FdMessage() {
    header.msg_iov = &payload;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMagic = 0x7a74726e73686d31ull;   // "ztrnshm1"
constexpr uint32_t kLayoutVersion = 1;
constexpr size_t kRandomBytes = 16;                   // 128 bits each: the socket name and the secret

// What a member sends to member 0: the secret, then its index.
struct Hello {
  unsigned char secret[kRandomBytes];
  int32_t member;
};

std::string errno_text(int error) { return std::strerror(error); }

int64_t round_up(int64_t value, int64_t to) { return (value + to - 1) / to * to; }

std::string to_hex(const unsigned char* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    text += digits[bytes[i] >> 4];
    text += digits[bytes[i] & 15];
  }
  return text;
}

bool from_hex(const std::string& text, unsigned char* bytes, size_t n) {
  if (text.size() != 2 * n) return false;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < n; ++i) {
    const int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    bytes[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset(int f = -1) {
    if (fd >= 0) ::close(fd);
    fd = f;
  }
};

sockaddr_un abstract_address(const std::string& name, socklen_t& length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  address.sun_path[0] = '\0';   // abstract: no file, gone with the last descriptor
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1'000'000));
}

char* map_segment(int fd, int64_t bytes, const std::string& who) {
  // MAP_POPULATE: the pages exist before the first collective, which then takes no faults.
  void* base = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ZT_CHECK(base != MAP_FAILED, CommError, who, ": mmap of the shared segment (", bytes, " bytes): ",
           errno_text(errno));
  // A child the member forks (a data loader's worker) neither inherits the segment nor keeps
  // it alive after the group is gone.
  if (::madvise(base, static_cast<size_t>(bytes), MADV_DONTFORK) != 0) {
    const int error = errno;
    ::munmap(base, static_cast<size_t>(bytes));
    throw CommError(detail::str(who, ": madvise(MADV_DONTFORK) of the shared segment: ", errno_text(error)));
  }
  return static_cast<char*>(base);
}

// Member 0: creates and maps the segment, serves it to every other member, then closes the
// socket and the memfd (the mapping keeps the memory).
char* create_and_serve(const Exchange& exchange, int size, const SegmentLayout& layout,
                       const std::vector<int>& job_ranks, std::chrono::milliseconds timeout, std::string& name_out) {
  const auto deadline = Clock::now() + timeout;
  const std::string who = "shared-memory group, " + member_label(0, job_ranks);
  unsigned char random[2 * kRandomBytes];
  ZT_CHECK(::getrandom(random, sizeof random, 0) == static_cast<ssize_t>(sizeof random), CommError, who,
           ": getrandom: ", errno_text(errno));
  const std::string name_hex = to_hex(random, kRandomBytes);
  const unsigned char* secret = random + kRandomBytes;
  name_out = kSegmentNamePrefix + name_hex;

  Fd memfd(::memfd_create(name_out.c_str(), MFD_CLOEXEC));
  ZT_CHECK(memfd.fd >= 0, CommError, who, ": memfd_create: ", errno_text(errno));
  ZT_CHECK(::ftruncate(memfd.fd, layout.total_bytes) == 0, CommError, who, ": ftruncate of the shared segment to ",
           layout.total_bytes, " bytes: ", errno_text(errno));
  char* base = map_segment(memfd.fd, layout.total_bytes, who);
  auto& header = *reinterpret_cast<SegmentHeader*>(base);
  header.magic = kMagic;
  header.size = static_cast<uint32_t>(size);
  header.layout_version = kLayoutVersion;
  header.slot_bytes = layout.slot_bytes;
  header.total_bytes = layout.total_bytes;
  if (size == 1) return base;

  try {
    Fd listener(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    ZT_CHECK(listener.fd >= 0, CommError, who, ": socket: ", errno_text(errno));
    socklen_t length = 0;
    const sockaddr_un address = abstract_address(name_out, length);
    ZT_CHECK(::bind(listener.fd, reinterpret_cast<const sockaddr*>(&address), length) == 0, CommError, who,
             ": bind of the abstract socket: ", errno_text(errno));
    ZT_CHECK(::listen(listener.fd, size + 8) == 0, CommError, who, ": listen: ", errno_text(errno));
    exchange.set(kSegmentExchangeKey, name_hex + " " + to_hex(secret, kRandomBytes));

    // Connections waiting for their hello; members already served.
    std::vector<int> pending;
    std::vector<bool> served(static_cast<size_t>(size), false);
    served[0] = true;
    int missing = size - 1;
    struct PendingCloser {
      std::vector<int>& fds;
      ~PendingCloser() { for (int fd : fds) ::close(fd); }
    } closer{pending};
    const uid_t uid = ::getuid();
    while (missing > 0) {
      std::vector<pollfd> polls{{listener.fd, POLLIN, 0}};
      for (int fd : pending) polls.push_back({fd, POLLIN, 0});
      const int left = remaining_ms(deadline);
      if (left == 0) {
        std::string who_is_missing;
        for (int m = 1; m < size; ++m) {
          if (served[static_cast<size_t>(m)]) continue;
          who_is_missing += (who_is_missing.empty() ? "" : ", ") + member_label(m, job_ranks);
        }
        throw TimeoutError(detail::str(who, ": ", who_is_missing, " did not connect to the shared-memory segment",
                                       " within ", timeout.count(), " ms"));
      }
      const int ready = ::poll(polls.data(), polls.size(), left);
      if (ready < 0 && errno == EINTR) continue;
      ZT_CHECK(ready >= 0, CommError, who, ": poll: ", errno_text(errno));
      for (size_t p = 1; p < polls.size(); ++p) {
        if (polls[p].revents == 0) continue;
        const int fd = polls[p].fd;
        pending.erase(std::find(pending.begin(), pending.end(), fd));
        Fd connection(fd);
        Hello hello{};
        const ssize_t got = ::recv(fd, &hello, sizeof hello, MSG_DONTWAIT);
        ucred credentials{};
        socklen_t credentials_length = sizeof credentials;
        const bool same_user = ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &credentials_length) == 0 &&
                               credentials.uid == uid;
        // Refused (closed without the descriptor): another user, a wrong secret, a member
        // index out of range or already served.
        if (got != static_cast<ssize_t>(sizeof hello) || !same_user ||
            std::memcmp(hello.secret, secret, kRandomBytes) != 0 || hello.member <= 0 || hello.member >= size ||
            served[static_cast<size_t>(hello.member)]) {
          continue;
        }
        FdMessage message;
        cmsghdr* header_part = CMSG_FIRSTHDR(&message.header);
        header_part->cmsg_level = SOL_SOCKET;
        header_part->cmsg_type = SCM_RIGHTS;
        header_part->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(header_part), &memfd.fd, sizeof(int));
        if (::sendmsg(fd, &message.header, MSG_NOSIGNAL) != 1) continue;   // it hung up: it may connect again
        served[static_cast<size_t>(hello.member)] = true;
        --missing;
      }
      if (polls[0].revents != 0) {
        const int fd = ::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) pending.push_back(fd);
      }
    }
  } catch (...) {
    ::munmap(base, static_cast<size_t>(layout.total_bytes));
    throw;
  }
  return base;
}

// Member `rank` > 0: connects to member 0's socket and receives the segment's descriptor.
char* receive(const Exchange& exchange, int rank, const SegmentLayout& layout, const std::vector<int>& job_ranks,
              std::chrono::milliseconds timeout, std::string& name_out) {
  const auto deadline = Clock::now() + timeout;
  const std::string who = "shared-memory group, " + member_label(rank, job_ranks);
  const std::string published = exchange.get(kSegmentExchangeKey);
  const size_t space = published.find(' ');
  Hello hello{};
  hello.member = rank;
  unsigned char name_bytes[kRandomBytes];
  ZT_CHECK(space != std::string::npos && from_hex(published.substr(0, space), name_bytes, kRandomBytes) &&
           from_hex(published.substr(space + 1), hello.secret, kRandomBytes),
           CommError, who, ": the store holds no valid segment address under '", kSegmentExchangeKey, "'");
  name_out = kSegmentNamePrefix + published.substr(0, space);

  Fd connection(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  ZT_CHECK(connection.fd >= 0, CommError, who, ": socket: ", errno_text(errno));
  socklen_t length = 0;
  const sockaddr_un address = abstract_address(name_out, length);
  ZT_CHECK(::connect(connection.fd, reinterpret_cast<const sockaddr*>(&address), length) == 0, CommError, who,
           ": connect to ", member_label(0, job_ranks), "'s socket: ", errno_text(errno));
  ZT_CHECK(::send(connection.fd, &hello, sizeof hello, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof hello),
           CommError, who, ": send to ", member_label(0, job_ranks), ": ", errno_text(errno));
  pollfd poll_fd{connection.fd, POLLIN, 0};
  int ready = 0;
  do {
    ready = ::poll(&poll_fd, 1, remaining_ms(deadline));
  } while (ready < 0 && errno == EINTR);
  ZT_CHECK(ready > 0, TimeoutError, who, ": ", member_label(0, job_ranks),
           " did not hand over the shared segment within ", timeout.count(), " ms");
  FdMessage message;
  const ssize_t got = ::recvmsg(connection.fd, &message.header, MSG_CMSG_CLOEXEC);
  ZT_CHECK(got >= 0, CommError, who, ": receive from ", member_label(0, job_ranks), ": ", errno_text(errno));
  const cmsghdr* part = CMSG_FIRSTHDR(&message.header);
  ZT_CHECK(got == 1 && part != nullptr && part->cmsg_level == SOL_SOCKET && part->cmsg_type == SCM_RIGHTS, CommError,
           who, ": ", member_label(0, job_ranks), " refused to hand over the shared segment (another group's "
           "member, or the same member twice?)");
  int fd_value = -1;
  std::memcpy(&fd_value, CMSG_DATA(part), sizeof fd_value);
  Fd memfd(fd_value);
  struct stat status {};
  ZT_CHECK(::fstat(memfd.fd, &status) == 0, CommError, who, ": fstat of the shared segment: ", errno_text(errno));
  ZT_CHECK(status.st_size == layout.total_bytes, CommError, who, ": the shared segment has ", status.st_size,
           " bytes where this member's options make ", layout.total_bytes,
           ": the members were given different sizes or slot_bytes");
  char* base = map_segment(memfd.fd, layout.total_bytes, who);
  const auto& header = *reinterpret_cast<const SegmentHeader*>(base);
  if (header.magic != kMagic || header.layout_version != kLayoutVersion ||
      header.size != static_cast<uint32_t>(layout.size) || header.slot_bytes != layout.slot_bytes) {
    ::munmap(base, static_cast<size_t>(layout.total_bytes));
    throw CommError(detail::str(who, ": the shared segment's layout (", header.size, " members, slot of ",
                                header.slot_bytes, " bytes) is not this member's (", layout.size, ", ",
                                layout.slot_bytes, ")"));
  }
  return base;
}

}  // namespace

std::string member_label(int member, const std::vector<int>& job_ranks) {
  std::string label = "member " + std::to_string(member);
  if (member >= 0 && static_cast<size_t>(member) < job_ranks.size()) {
    label += " (job rank " + std::to_string(job_ranks[static_cast<size_t>(member)]) + ")";
  }
  return label;
}

SegmentLayout SegmentLayout::compute(int size, int64_t slot_bytes) {
  SegmentLayout layout;
  layout.size = size;
  layout.slot_bytes = slot_bytes;
  layout.lines_offset = round_up(static_cast<int64_t>(sizeof(SegmentHeader)), 64);
  layout.data_offset = round_up(layout.lines_offset + size * static_cast<int64_t>(sizeof(MemberLine)), 4096);
  layout.set_bytes = (size + 1) * slot_bytes;
  layout.total_bytes = layout.data_offset + 2 * layout.set_bytes;
  return layout;
}

Segment Segment::join(const Exchange& exchange, int rank, int size, int64_t slot_bytes,
                      const std::vector<int>& job_ranks, std::chrono::milliseconds timeout) {
  ZT_CHECK(size >= 1 && size <= kMaxMembers, CommError, "shared-memory group: ", size,
           " members (1 to ", kMaxMembers, " can share a segment)");
  ZT_CHECK(rank >= 0 && rank < size, CommError, "shared-memory group: member ", rank, " of ", size);
  ZT_CHECK(slot_bytes >= 4096 && slot_bytes % 64 == 0, CommError, "shared-memory group: slot_bytes ", slot_bytes,
           " (at least 4096, a multiple of 64)");
  const SegmentLayout layout = SegmentLayout::compute(size, slot_bytes);
  std::string name;
  char* base = rank == 0 ? create_and_serve(exchange, size, layout, job_ranks, timeout, name)
                         : receive(exchange, rank, layout, job_ranks, timeout, name);
  Segment segment(base, layout, name);
  segment.header().pids[rank].store(static_cast<int32_t>(::getpid()), std::memory_order_release);
  return segment;
}

Segment::Segment(Segment&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), layout_(other.layout_), name_(std::move(other.name_)) {}

Segment::~Segment() {
  if (base_ != nullptr) ::munmap(base_, static_cast<size_t>(layout_.total_bytes));
}

}  // namespace zerotrain::comm::shm
