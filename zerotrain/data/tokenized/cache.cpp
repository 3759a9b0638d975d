#include "zerotrain/data/tokenized/cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <system_error>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::data::tokenized {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'Z', 'T', 'T', 'O', 'K', 'E', 'N', 'S'};

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t key;
  uint64_t documents;
  uint64_t tokens;
  uint64_t payload_checksum;
  uint64_t reserved[2];
};
static_assert(sizeof(Header) == 64, "the cache header is 64 bytes on disk");

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

uint64_t payload_bytes(uint64_t documents, uint64_t tokens) { return documents * 8 + tokens * 5; }

// XXH3-64 of a file's bytes, read in blocks.
std::pair<int64_t, uint64_t> content_checksum(const fs::path& path) {
  files::InputFile file(path, {.what = "data file"});
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  ZT_CHECK(state != nullptr, ResourceError, "no memory for a checksum state");
  XXH3_64bits_reset(state.get());
  std::vector<char> block(size_t{1} << 20);
  int64_t total = 0;
  for (;;) {
    const int64_t got = file.read_up_to(block.data(), static_cast<int64_t>(block.size()));
    if (got == 0) break;
    XXH3_64bits_update(state.get(), block.data(), static_cast<size_t>(got));
    total += got;
  }
  return {total, XXH3_64bits_digest(state.get())};
}

// A read-only mapping of a whole file, unmapped when the last TokenStream over it goes.
struct Mapping {
  void* address = MAP_FAILED;
  size_t length = 0;
  ~Mapping() {
    if (address != MAP_FAILED) ::munmap(address, length);
  }
};

bool write_all(int fd, const void* data, size_t nbytes, int& error) {
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    const ssize_t wrote = ::write(fd, p, nbytes);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      error = errno;
      return false;
    }
    p += wrote;
    nbytes -= static_cast<size_t>(wrote);
  }
  return true;
}

bool is_permission_problem(int error) {
  return error == EACCES || error == EPERM || error == EROFS || error == ENOTDIR || error == EEXIST;
}

}  // namespace

uint64_t cache_key(const fs::path& source, std::string_view mode, const TextEncoder& encoder) {
  const auto [bytes, checksum] = content_checksum(source);
  const std::string material = "zerotrain tokens\nversion=" + std::to_string(kCacheFormatVersion) +
                               "\nmode=" + std::string(mode) + "\nsource_bytes=" + std::to_string(bytes) +
                               "\nsource_xxh3=" + hex(checksum) + "\ntokenizer=" + encoder.fingerprint +
                               "\nvocab_size=" + std::to_string(encoder.vocab_size) +
                               "\neos=" + std::to_string(encoder.eos_id) +
                               "\nbos=" + (encoder.bos_id ? std::to_string(*encoder.bos_id) : "none") + "\n";
  return XXH3_64bits(material.data(), material.size());
}

fs::path cache_file(const fs::path& source, uint64_t key) {
  return fs::path(source.string() + kCacheFolderSuffix) / (hex(key) + ".bin");
}

std::optional<TokenStream> read_cache(const fs::path& file, uint64_t key, int64_t vocab_size, std::string& problem) {
  problem.clear();
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno != ENOENT) problem = "cannot be opened: " + files::describe_errno(errno);
    return std::nullopt;
  }
  struct stat st {};
  auto mapping = std::make_shared<Mapping>();
  const bool mapped = [&] {
    if (::fstat(fd, &st) != 0) {
      problem = "cannot be inspected: " + files::describe_errno(errno);
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      problem = files::file_kind(st.st_mode) + ", not a cache file";
      return false;
    }
    if (st.st_size < static_cast<off_t>(sizeof(Header))) {
      problem = "is " + std::to_string(st.st_size) + " bytes, shorter than its header";
      return false;
    }
    mapping->length = static_cast<size_t>(st.st_size);
    mapping->address = ::mmap(nullptr, mapping->length, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping->address == MAP_FAILED) {
      problem = "cannot be mapped: " + files::describe_errno(errno);
      return false;
    }
    return true;
  }();
  ::close(fd);
  if (!mapped) return std::nullopt;

  const auto* base = static_cast<const unsigned char*>(mapping->address);
  Header header;
  std::memcpy(&header, base, sizeof header);
  auto fail = [&](std::string why) -> std::optional<TokenStream> {
    problem = std::move(why);
    return std::nullopt;
  };
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) return fail("does not start with ZTTOKENS");
  if (header.version != kCacheFormatVersion) {
    return fail("has format version " + std::to_string(header.version) + ", not " +
                std::to_string(kCacheFormatVersion));
  }
  if (header.header_bytes != sizeof(Header)) return fail("has a header of the wrong size");
  if (header.key != key) return fail("was written for another key (" + hex(header.key) + ")");
  // Bounds first, so that the size arithmetic below cannot overflow.
  const uint64_t limit = mapping->length;
  if (header.documents == 0 || header.tokens == 0 || header.documents > limit || header.tokens > limit ||
      sizeof(Header) + payload_bytes(header.documents, header.tokens) != limit) {
    return fail("is " + std::to_string(limit) + " bytes, which does not match its header (" +
                std::to_string(header.documents) + " documents, " + std::to_string(header.tokens) +
                " tokens): it was cut short or overwritten");
  }
  const unsigned char* payload = base + sizeof(Header);
  if (XXH3_64bits(payload, limit - sizeof(Header)) != header.payload_checksum) {
    return fail("does not match its checksum: it was damaged");
  }
  const auto documents = static_cast<size_t>(header.documents);
  const auto tokens = static_cast<size_t>(header.tokens);
  TokenStream stream;
  stream.document_starts = {reinterpret_cast<const int64_t*>(payload), documents};
  stream.tokens = {reinterpret_cast<const int32_t*>(payload + documents * 8), tokens};
  stream.trained = {payload + documents * 8 + tokens * 4, tokens};
  // A checksum proves the bytes are the ones written, not that the writer was right: check
  // what the dataset relies on, so that a bad file is an error here, not a wrong batch later.
  if (stream.document_starts[0] != 0) return fail("has a first document that does not start at 0");
  for (size_t d = 1; d < documents; ++d) {
    if (stream.document_starts[d] <= stream.document_starts[d - 1] ||
        stream.document_starts[d] >= static_cast<int64_t>(tokens)) {
      return fail("has document starts out of order");
    }
  }
  for (const int32_t id : stream.tokens) {
    if (id < 0 || id >= vocab_size) {
      return fail("holds token id " + std::to_string(id) + ", outside the vocabulary of " +
                  std::to_string(vocab_size));
    }
  }
  for (const uint8_t flag : stream.trained) {
    if (flag > 1) return fail("holds a trained flag that is neither 0 nor 1");
  }
  stream.storage = std::move(mapping);
  return stream;
}

CacheWrite write_cache(const fs::path& file, uint64_t key, const TokenStream& stream) {
  CacheWrite result;
  const fs::path folder = file.parent_path();
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) {
    result.unwritable = true;
    result.problem = "cannot create " + folder.string() + ": " + ec.message();
    return result;
  }
  // Unique to this process: ranks that write the same cache at once never share a temporary file.
  std::string temp = (folder / (file.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) {
    const int error = errno;
    result.unwritable = is_permission_problem(error);
    result.problem = "cannot create a file in " + folder.string() + ": " + files::describe_errno(error);
    return result;
  }
  ::fchmod(fd, 0644);   // mkstemp's 0600 would keep the other users of a shared corpus out
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kCacheFormatVersion;
  header.header_bytes = sizeof(Header);
  header.key = key;
  header.documents = static_cast<uint64_t>(stream.documents());
  header.tokens = static_cast<uint64_t>(stream.size());
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  XXH3_64bits_update(state.get(), stream.document_starts.data(), stream.document_starts.size_bytes());
  XXH3_64bits_update(state.get(), stream.tokens.data(), stream.tokens.size_bytes());
  XXH3_64bits_update(state.get(), stream.trained.data(), stream.trained.size_bytes());
  header.payload_checksum = XXH3_64bits_digest(state.get());
  int error = 0;
  const bool ok = write_all(fd, &header, sizeof header, error) &&
                  write_all(fd, stream.document_starts.data(), stream.document_starts.size_bytes(), error) &&
                  write_all(fd, stream.tokens.data(), stream.tokens.size_bytes(), error) &&
                  write_all(fd, stream.trained.data(), stream.trained.size_bytes(), error) &&
                  (::fsync(fd) == 0 || ((error = errno), false));
  if (::close(fd) != 0 && ok) error = errno;
  if (!ok || error != 0 || ::rename(temp.c_str(), file.c_str()) != 0) {
    if (error == 0) error = errno;
    ::unlink(temp.c_str());
    result.unwritable = is_permission_problem(error);
    result.problem = "cannot write " + file.string() + ": " + files::describe_errno(error);
    return result;
  }
  result.written = true;
  return result;
}

const char* cache_use_name(CacheUse use) {
  switch (use) {
    case CacheUse::kDisabled: return "disabled";
    case CacheUse::kRead: return "read";
    case CacheUse::kWritten: return "written";
    case CacheUse::kRebuilt: return "rebuilt";
    case CacheUse::kNotWritten: return "not written";
  }
  return "?";
}

namespace {

// Held while a process looks for the cache and, missing it, tokenises and writes it: the ranks
// of a host that open the same corpus together take turns, so one tokenises and the others
// read what it wrote, instead of all tokenising the same text at once. Where the lock file
// cannot be made (a folder that cannot be written), nothing is held: each process tokenises
// on its own, as it would anyway without a cache.
class BuildLock {
 public:
  explicit BuildLock(const fs::path& cache) {
    std::error_code ec;
    fs::create_directories(cache.parent_path(), ec);
    fd_ = ::open((cache.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~BuildLock() {
    if (fd_ >= 0) ::close(fd_);   // closing releases the lock
  }
  BuildLock(const BuildLock&) = delete;
  BuildLock& operator=(const BuildLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

CachedStream cached_stream(const fs::path& source, std::string_view mode, const TextEncoder& encoder, bool enabled,
                           const std::function<TokenStream()>& build) {
  CachedStream out;
  if (!enabled) {
    out.stream = build();
    return out;
  }
  const uint64_t key = cache_key(source, mode, encoder);
  const fs::path file = cache_file(source, key);
  std::string problem;
  auto read = [&]() {
    problem.clear();
    std::optional<TokenStream> cached = read_cache(file, key, encoder.vocab_size, problem);
    if (cached) {
      ZT_LOG_DEBUG("tokens of ", source.string(), " read from the cache ", file.string());
      out.stream = std::move(*cached);
      out.use = CacheUse::kRead;
    }
    return cached.has_value();
  };
  // A cache that is there is read without the lock, by every rank at once; only a miss takes
  // turns, and reads again once it has the lock: another rank may have written it meanwhile.
  if (read()) return out;
  const BuildLock lock(file);
  if (read()) return out;
  const bool damaged = !problem.empty();
  if (damaged) {
    ZT_LOG_WARN("the token cache ", file.string(), " ", problem, "; it is ignored and rebuilt");
  }
  out.stream = build();
  const CacheWrite wrote = write_cache(file, key, out.stream);
  if (wrote.written) {
    out.use = damaged ? CacheUse::kRebuilt : CacheUse::kWritten;
  } else {
    out.use = CacheUse::kNotWritten;
    // Once per corpus and process: the train and eval splits open the same file.
    static std::mutex told_mutex;
    static std::set<std::string> told;
    {
      const std::lock_guard<std::mutex> lock(told_mutex);
      if (!told.insert(file.string()).second) return out;
    }
    if (wrote.unwritable) {
      ZT_LOG_INFO("no token cache for ", source.string(), ": ", wrote.problem,
                  "; training without one (the corpus is tokenised again at every run)");
    } else {
      ZT_LOG_WARN("no token cache for ", source.string(), ": ", wrote.problem,
                  "; training without one (the corpus is tokenised again at every run)");
    }
  }
  return out;
}

}  // namespace zerotrain::data::tokenized
