"""nfnetlink_queue messages, packed and parsed with `struct` (pure: no sockets here).

Layouts from the Linux UAPI headers: ``linux/netlink.h`` (``struct nlmsghdr``: u32 length,
u16 type, u16 flags, u32 seq, u32 pid, host byte order; attributes ``struct nlattr``: u16
length, u16 type, 4-byte aligned), ``linux/netfilter/nfnetlink.h`` (``struct nfgenmsg``:
u8 family, u8 version, be16 res_id; message type = subsystem << 8 | message,
``NFNL_SUBSYS_QUEUE`` = 3) and ``linux/netfilter/nfnetlink_queue.h`` (the config command,
config params, verdict header and packet header structs and the attribute numbers below).
Attributes of nfnetlink are big-endian (network order) where the header says ``__be``.
"""

import struct
from collections.abc import Iterator

__all__ = [
    "NETLINK_NETFILTER",
    "NF_ACCEPT",
    "NF_DROP",
    "NetlinkError",
    "PacketInfo",
    "config_bind",
    "config_flags",
    "config_maxlen",
    "config_params",
    "config_unbind",
    "error_code",
    "iter_messages",
    "parse_packet",
    "verdict",
    "verdict_batch",
]

NETLINK_NETFILTER = 12  # linux/netlink.h
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR, NLMSG_DONE = 0x2, 0x3
NFNL_SUBSYS_QUEUE = 3
NFNETLINK_V0 = 0
AF_UNSPEC, AF_INET = 0, 2
# enum nfqnl_msg_types
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 1, 2, 3
# enum nfqnl_attr_type
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_PAYLOAD, NFQA_CAP_LEN = 1, 2, 10, 13
# enum nfqnl_attr_config
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
# enum nfqnl_msg_config_cmds
NFQNL_CFG_CMD_BIND, NFQNL_CFG_CMD_UNBIND = 1, 2
# enum nfqnl_config_mode
NFQNL_COPY_META, NFQNL_COPY_PACKET = 1, 2
# flags for NFQA_CFG_FLAGS
NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_GSO = 1 << 0, 1 << 2
# linux/netfilter.h verdicts
NF_DROP, NF_ACCEPT = 0, 1

_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid (host order)
_NFGENMSG = struct.Struct("!BBH")  # family, version, res_id (queue number, big-endian)
_NLATTR = struct.Struct("=HH")  # len, type (host order)
_PACKET_HDR = struct.Struct("!IHB")  # packet_id, hw_protocol, hook (packed, 7 bytes)
_BE32 = struct.Struct("!I")


class NetlinkError(OSError):
    """The kernel answered a request with an error (NLMSG_ERROR with a negative errno)."""


class PacketInfo(tuple):
    """(packet_id, length_bytes) of one queued packet: the whole packet's length, not the copied part."""

    __slots__ = ()

    def __new__(cls, packet_id: int, length_bytes: int):
        return super().__new__(cls, (packet_id, length_bytes))

    packet_id = property(lambda self: self[0])
    length_bytes = property(lambda self: self[1])


def _align(n: int) -> int:
    """NLMSG_ALIGN / NLA_ALIGN: round up to a multiple of 4."""
    return (n + 3) & ~3


def attr(kind: int, payload: bytes) -> bytes:
    """One netlink attribute (struct nlattr + payload), padded to 4 bytes."""
    length = _NLATTR.size + len(payload)
    return _NLATTR.pack(length, kind) + payload + b"\0" * (_align(length) - length)


def message(msg: int, queue: int, attrs: bytes, *, seq: int = 0, ack: bool = False,
            family: int = AF_UNSPEC) -> bytes:
    """A request to the queue subsystem: nlmsghdr + nfgenmsg(res_id = queue) + attributes."""
    body = _NFGENMSG.pack(family, NFNETLINK_V0, queue) + attrs
    flags = NLM_F_REQUEST | (NLM_F_ACK if ack else 0)
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq, 0) + body


def config_bind(queue: int, *, seq: int = 0) -> bytes:
    """NFQNL_MSG_CONFIG with NFQNL_CFG_CMD_BIND: this socket receives `queue`'s packets."""
    cmd = struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, AF_INET)  # struct nfqnl_msg_config_cmd
    return message(NFQNL_MSG_CONFIG, queue, attr(NFQA_CFG_CMD, cmd), seq=seq, ack=True)


def config_unbind(queue: int, *, seq: int = 0) -> bytes:
    """NFQNL_MSG_CONFIG with NFQNL_CFG_CMD_UNBIND."""
    cmd = struct.pack("!BBH", NFQNL_CFG_CMD_UNBIND, 0, AF_INET)
    return message(NFQNL_MSG_CONFIG, queue, attr(NFQA_CFG_CMD, cmd), seq=seq, ack=True)


def config_params(queue: int, copy_range: int, *, seq: int = 0) -> bytes:
    """NFQNL_MSG_CONFIG with params: copy mode PACKET, the first `copy_range` bytes of each packet.

    A packet longer than `copy_range` then carries NFQA_CAP_LEN, its full length.
    """
    params = struct.pack("!IB", copy_range, NFQNL_COPY_PACKET)  # struct nfqnl_msg_config_params
    return message(NFQNL_MSG_CONFIG, queue, attr(NFQA_CFG_PARAMS, params), seq=seq, ack=True)


def config_flags(queue: int, flags: int, mask: int, *, seq: int = 0) -> bytes:
    """NFQNL_MSG_CONFIG setting NFQA_CFG_FLAGS under NFQA_CFG_MASK (both be32)."""
    attrs = attr(NFQA_CFG_MASK, _BE32.pack(mask)) + attr(NFQA_CFG_FLAGS, _BE32.pack(flags))
    return message(NFQNL_MSG_CONFIG, queue, attrs, seq=seq, ack=True)


def config_maxlen(queue: int, maxlen: int, *, seq: int = 0) -> bytes:
    """NFQNL_MSG_CONFIG setting the queue's length limit (NFQA_CFG_QUEUE_MAXLEN, be32)."""
    return message(NFQNL_MSG_CONFIG, queue, attr(NFQA_CFG_QUEUE_MAXLEN, _BE32.pack(maxlen)), seq=seq, ack=True)


def verdict(queue: int, packet_id: int, decision: int = NF_ACCEPT) -> bytes:
    """NFQNL_MSG_VERDICT for one packet (struct nfqnl_msg_verdict_hdr: be32 verdict, be32 id)."""
    return message(NFQNL_MSG_VERDICT, queue, attr(NFQA_VERDICT_HDR, struct.pack("!II", decision, packet_id)))


def verdict_batch(queue: int, last_id: int, decision: int = NF_ACCEPT) -> bytes:
    """NFQNL_MSG_VERDICT_BATCH: the same verdict for every queued packet with id <= `last_id`."""
    return message(NFQNL_MSG_VERDICT_BATCH, queue,
                   attr(NFQA_VERDICT_HDR, struct.pack("!II", decision, last_id)))


def iter_messages(buf, nbytes: int | None = None) -> Iterator[tuple[int, int, int, memoryview]]:
    """(type, flags, seq, payload) of every netlink message in `buf[:nbytes]`.

    NLMSG_ERROR messages (acknowledgements, errno 0, and errors) are yielded like any
    other; `error_code` reads their errno.
    """
    view = memoryview(buf)[: len(buf) if nbytes is None else nbytes]
    off = 0
    while off + _NLMSGHDR.size <= len(view):
        length, kind, flags, seq, _ = _NLMSGHDR.unpack_from(view, off)
        if length < _NLMSGHDR.size or off + length > len(view):
            raise ValueError(f"truncated netlink message at offset {off} (length {length})")
        payload = view[off + _NLMSGHDR.size : off + length]
        yield kind, flags, seq, payload
        off += _align(length)


def error_code(payload) -> int:
    """The errno of an NLMSG_ERROR payload (struct nlmsgerr: int error, negative): 0 for an ack."""
    return -struct.unpack_from("=i", payload, 0)[0]


def parse_packet(payload) -> PacketInfo:
    """Packet id and full length from an NFQNL_MSG_PACKET payload (nfgenmsg + attributes).

    The length is NFQA_CAP_LEN when the kernel sent it (the packet was longer than the copy
    range), else the copied payload's length.  With the GSO flag an offloaded packet of up
    to 64 KiB arrives whole, so this is the length of the whole super-packet.
    """
    view = memoryview(payload)
    off = _NFGENMSG.size
    packet_id = cap_len = payload_len = None
    while off + _NLATTR.size <= len(view):
        alen, akind = _NLATTR.unpack_from(view, off)
        if alen < _NLATTR.size:
            raise ValueError(f"bad netlink attribute length {alen}")
        akind &= 0x3FFF  # drop NLA_F_NESTED / NLA_F_NET_BYTEORDER
        data = off + _NLATTR.size
        if akind == NFQA_PACKET_HDR:
            packet_id = _PACKET_HDR.unpack_from(view, data)[0]
        elif akind == NFQA_CAP_LEN:
            cap_len = _BE32.unpack_from(view, data)[0]
        elif akind == NFQA_PAYLOAD:
            payload_len = alen - _NLATTR.size
        off += _align(alen)
    if packet_id is None:
        raise ValueError("queued packet without NFQA_PACKET_HDR")
    return PacketInfo(packet_id, cap_len if cap_len is not None else (payload_len or 0))
