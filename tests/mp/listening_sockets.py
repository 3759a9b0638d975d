#!/usr/bin/env python3
"""The listening TCP sockets of this host, read from /proc/net/tcp and tcp6, one "ADDRESS PORT
PROGRAM REACH" line each (PROGRAM: "-" where no process was looked at; REACH: "loopback" for
127.0.0.0/8 and ::1, "exposed" for any other address, 0.0.0.0 and :: included).

  listening_sockets.py --port PORT            those on PORT, whoever holds them
  listening_sockets.py --under PID [--skip NAME]
                                              those held by PID's descendants (not PID), except
                                              processes named NAME (/proc/PID/comm)
Exits 0; prints nothing where there is none."""

import argparse
import ipaddress
import os


def listening():
    """inode -> (address, port) of every socket in LISTEN state."""
    found = {}
    for path, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        try:
            lines = open(path).read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":   # TCP_LISTEN
                continue
            address_hex, port_hex = fields[1].split(":")
            raw = bytes.fromhex(address_hex)
            # The kernel prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, width, 4))
            address = ipaddress.ip_address(raw)
            found[fields[9]] = (address, int(port_hex, 16))
    return found


def reach(address):
    mapped = getattr(address, "ipv4_mapped", None)
    return "loopback" if address.is_loopback or (mapped is not None and mapped.is_loopback) else "exposed"


def descendants(root):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(parent, []).append(int(entry))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def socket_inodes(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    parser.add_argument("--under", type=int)
    parser.add_argument("--skip", default="")
    args = parser.parse_args()
    sockets = listening()
    if args.port is not None:
        for address, port in sockets.values():
            if port == args.port:
                print(address, port, "-", reach(address))
        return
    for pid in descendants(args.under):
        try:
            name = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            continue
        if name == args.skip:
            continue
        for inode in socket_inodes(pid):
            if inode in sockets:
                address, port = sockets[inode]
                print(address, port, name, reach(address))


if __name__ == "__main__":
    main()
