// Which ranks share a host, in the sense that matters to shared memory: the same kernel
// (boot id) and the same network and PID namespaces (the segment is handed over an abstract
// Unix socket, which lives in a network namespace; a peer's liveness is read from its pid).
// Two containers on one machine with their own namespaces are two hosts, as they should be.
#pragma once

#include <string>

namespace zerotrain::comm::shm {

// "<boot id>/net:<inode>/pid:<inode>" for job rank `rank`. ZEROTRAIN_HOST_ID, when set,
// replaces it: one name for every rank, or a comma-separated list with one name per rank
// ("a,a,b,b"). Tests use it to split the ranks of one machine into pretend hosts; it must
// not join ranks that do not share the namespaces above.
std::string host_identity(int rank);

}  // namespace zerotrain::comm::shm
