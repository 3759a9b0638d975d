// A TCP port held for the rendezvous store of a job this launcher picks the port for.
//
// Finding a free port by binding port 0 and closing the socket leaves a gap until rank 0
// listens there (seconds: it imports LibTorch first), and in that gap any outgoing connection
// on the host may be given the same port from the ephemeral range: rank 0 then fails with
// "Address already in use". Held instead: a socket bound to the port on every address, with
// SO_REUSEADDR and never listening. Linux gives no other socket that port, neither to bind(0)
// nor to connect(), while rank 0, which binds with SO_REUSEADDR (zerotrain's store and
// c10d's TCPStore both do), can still bind and listen there.
#pragma once

namespace zerotrain::launch {

class PortReservation {
 public:
  // A free port, held until this object is destroyed. Throws IoError where no socket can be made.
  PortReservation();
  ~PortReservation();
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;

  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace zerotrain::launch
