#include "zerotrain/comm/rendezvous/store.h"

#include "zerotrain/comm/backend.h"
#include "zerotrain/comm/rendezvous/job_token.h"
#include "zerotrain/comm/rendezvous/store_listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "zerotrain/core/env.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"

namespace zerotrain::comm::detail {

namespace {

// Whether another process already serves the store at the address: torchrun's agent (which
// says so with TORCHELASTIC_USE_AGENT_STORE=True), or torch.distributed initialised first in
// rank 0's process (the Python package sets ZEROTRAIN_STORE_SERVED=1). Rank 0 then connects
// like the others instead of failing to listen on a port in use.
bool store_served_elsewhere() {
  return env::get("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True" ||
         env::get("ZEROTRAIN_STORE_SERVED").value_or("") == "1";
}

}  // namespace

StoreAddress master_store_address(const RendezvousInfo& where) {
  return {where.master_addr, where.master_port, where.local_world_size < where.world_size};
}

c10::intrusive_ptr<c10d::Store> connect_store(const StoreAddress& address, int rank, int world_size,
                                              std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(address.port);
  options.isServer = rank == 0 && !store_served_elsewhere();
  options.numWorkers = world_size;
  options.waitWorkers = false;
  options.timeout = timeout;
  if (options.isServer) {
    // c10d's own listener would be on every interface; MASTER_ADDR's is enough.
    const StoreListener listener = listen_for_store(address.host, address.port, address.spans_hosts);
    options.masterListenFd = listener.fd;
    options.port = static_cast<std::uint16_t>(listener.port);
  }
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(address.host, options);
  } catch (const std::exception& e) {
    throw CommError(str("rank ", rank, " could not ", rank == 0 ? "serve" : "reach",
                        " the rendezvous store at ", address.host, ":", address.port, " (", first_line(e),
                        "). Check MASTER_ADDR/MASTER_PORT: rank 0 must be able to listen there and every "
                        "rank to connect; a port in use by an earlier job also causes this"),
                    "rendezvous");
  }
  check_job_token(*store, rank, timeout);
  return store;
}

int store_port(const c10::intrusive_ptr<c10d::Store>& store) {
  auto* tcp = dynamic_cast<c10d::TCPStore*>(store.get());
  ZT_INTERNAL_ASSERT(tcp != nullptr);
  return tcp->getPort();
}

void wait_for_ranks(c10d::Store& store, int rank, int world_size, std::chrono::milliseconds timeout,
                    const std::string& what) {
  // Rank 0 serves the store: it gives up a little after the others, so that they can still
  // read the store and name the missing ranks themselves instead of losing the connection.
  const auto grace = rank == 0 ? std::min<std::chrono::milliseconds>(timeout / 2, std::chrono::seconds(2))
                               : std::chrono::milliseconds(0);
  const auto deadline = std::chrono::steady_clock::now() + timeout + grace;
  std::vector<int> missing;
  try {
    store.set(str("zt/arrived/", rank), std::string("1"));
    do {
      missing.clear();
      for (int r = 0; r < world_size; ++r) {
        if (!store.check({str("zt/arrived/", r)})) missing.push_back(r);
      }
      if (missing.empty()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
  } catch (const std::exception& e) {
    throw CommError(str("rank ", rank, " lost the rendezvous store while waiting for the other ranks to start ", what,
                        " (", first_line(e), "); rank 0, which serves it, has probably "
                        "exited: see its output"),
                    "rendezvous");
  }
  std::string names;
  for (int r : missing) names += (names.empty() ? "" : ", ") + std::to_string(r);
  throw TimeoutError(str("rank ", rank, " waited ", timeout.count() / 1000.0, " s for the other ranks to start ", what,
                         "; ranks that did not arrive: ", names,
                         ". Check that they started (their output), or raise ZEROTRAIN_COMM_TIMEOUT_S"));
}

namespace {

std::string progress_key(int rank) { return str("zt/progress/", rank); }

class StoreBoard final : public ProgressBoard {
 public:
  StoreBoard(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size)
      : store_(std::move(store)), rank_(rank), world_size_(world_size) {
    latest_ = "0 init";
    flush();
    flusher_ = std::thread([this] { run(); });
  }
  ~StoreBoard() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    flusher_.join();
    flush();   // what this rank issued last, for the peers' timeout messages
  }

  void publish(int64_t seq, const std::string& what) override {
    std::lock_guard lock(mutex_);
    latest_ = str(seq, " ", what);
  }

  std::vector<RankProgress> snapshot() override {
    // Let every rank's flusher write what it issued last.
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * kFlushMs));
    std::vector<RankProgress> board;
    for (int r = 0; r < world_size_; ++r) {
      RankProgress p{r};
      try {
        if (store_->check({progress_key(r)})) {
          auto bytes = store_->get(progress_key(r));
          std::string text(bytes.begin(), bytes.end());
          const size_t space = text.find(' ');
          p.known = true;
          p.seq = std::stoll(text.substr(0, space));
          p.what = space == std::string::npos ? "" : text.substr(space + 1);
        } else {
          p.what = "never connected to the store";
        }
      } catch (const std::exception& e) {
        p.what = "store unreachable; rank 0 may have exited";
      }
      board.push_back(std::move(p));
    }
    return board;
  }

 private:
  static constexpr int kFlushMs = 100;

  void flush() {
    std::string value;
    {
      std::lock_guard lock(mutex_);
      if (latest_ == written_) return;
      value = latest_;
    }
    try {
      store_->set(progress_key(rank_), value);
      written_ = value;
    } catch (const std::exception&) {
      // The store is gone (rank 0 exited): nothing to publish to; the collectives report it.
    }
  }

  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(kFlushMs));
      if (stop_) break;
      lock.unlock();
      flush();
      lock.lock();
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const int world_size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string latest_;
  std::string written_;   // only the flusher thread touches it after construction
  bool stop_ = false;
  std::thread flusher_;
};

}  // namespace

std::unique_ptr<ProgressBoard> make_store_board(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size) {
  return std::make_unique<StoreBoard>(std::move(store), rank, world_size);
}

std::string local_address_towards(const std::string& peer) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(peer.c_str(), "9", &hints, &found) != 0 || found == nullptr) {
    throw CommError(str("cannot resolve MASTER_ADDR '", peer, "'; use an IP address or a hostname every node resolves"),
                    "rendezvous");
  }
  std::string local = "127.0.0.1";
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  // A UDP connect sends nothing; it only asks the kernel which interface routes to the peer.
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in self{};
    socklen_t len = sizeof(self);
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0 &&
        ::inet_ntop(AF_INET, &self.sin_addr, text, sizeof(text)) != nullptr) {
      local = text;
    }
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(found);
  return local;
}

}  // namespace zerotrain::comm::detail
