#!/usr/bin/env python3
"""Seeds for predict_fuzz (its input format is in predict_fuzz.cc): runs of
in-order RDMA WRITE ONLY requests to each QP, in-order multi-packet WRITE
messages to each QP at each MTU, and both with the usual trouble
(duplicates, gaps, other keys and opcodes, lengths that disagree, bytes
flipped with and without the checksums fixed). Writes corpus/predict/*;
run it again only to change the seeds."""
import os
import random

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus", "predict")
os.makedirs(out, exist_ok=True)
rng = random.Random(20261129)


def record(qp, psn_step=4, key=0, other_op=None, fix=False, end=False, timers=False,
           va=0, length=64, dma=128, muts=()):
    ctrl = qp | key << 2 | (0x10 if other_op is not None else 0) | (0x20 if fix else 0) \
        | (0x40 if end else 0) | (0x80 if timers else 0)
    psn = (psn_step & 15) | 0x10 | ((other_op or 0) << 5)
    rec = bytes([ctrl, psn, va >> 8 & 255, va & 255, length >> 8 & 255, length & 255,
                 dma & 255, len(muts)])
    for off, x in muts:
        rec += bytes([off >> 8 & 255, off & 255, x])
    return rec


MESSAGE = 7  # other_op: a packet of the QP's multi-packet message


def message_record(qp, packets=4, last_words=64, va=0, off=0, psn_step=4, **kw):
    """A packet of a message of `packets` (2..9) packets whose last carries
    `last_words` words; off != 0 breaks it (see predict_fuzz.cc)."""
    return record(qp, psn_step=psn_step, other_op=MESSAGE, va=va,
                  length=(packets - 2) << 8 | (last_words - 1), dma=128 + off, **kw)


def seed(name, setup, records):
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([setup]) + b"".join(records))


for qp in range(4):
    seed(f"in_order_qp{qp}", 1 | 4 * (qp & 1),
         [record(qp, va=64 * i, end=(i % 8 == 7)) for i in range(24)])
    seed(f"large_qp{qp}", 3, [record(qp, va=4096 * (i % 3), length=4096 if qp != 1 else 1024,
                                     end=True) for i in range(6)])
for n in range(8):
    recs = []
    for i in range(20):
        qp = rng.randrange(4)
        kind = rng.randrange(10)
        recs.append(record(
            qp,
            psn_step={0: 3, 1: 7}.get(kind, 4),
            key={2: 1, 3: 2}.get(kind, 0),
            other_op=rng.randrange(8) if kind == 4 else None,
            fix=kind in (5, 6),
            end=rng.random() < 0.3,
            timers=kind == 7,
            va=rng.randrange(16384 + 64),
            length=rng.choice([0, 4, 60, 64, 256, 1024, 2048]),
            dma=128 + (rng.choice([-4, 4]) if kind == 8 else 0),
            muts=[(rng.randrange(200), 1 << rng.randrange(8))] if kind in (5, 9) else ()))
    seed(f"mixed_{n}", rng.randrange(8), recs)

# Messages in order: every QP, every MTU (setup bits 0-1), a burst ending
# now and then, a whole message or two per QP.
for qp in range(4):
    for mtu in range(4):
        packets = 2 + (qp + mtu) % 4
        recs = [message_record(qp, packets=packets, last_words=1 + 7 * mtu, va=512 * qp,
                               end=(i % 5 == 4))
                for i in range(2 * packets)]
        seed(f"messages_qp{qp}_mtu{mtu}", mtu | 4 * (mtu & 1), recs)
# Messages in trouble: lost, repeated and early packets, a FIRST whose DMA
# length is off, a MIDDLE or LAST of the wrong length, another opcode or a
# WRITE ONLY cutting in, bad keys, bytes flipped.
for n in range(8):
    recs = []
    for i in range(24):
        qp = rng.randrange(4)
        kind = rng.randrange(12)
        if kind == 0:
            recs.append(record(qp, other_op=rng.randrange(7), end=rng.random() < 0.2))
            continue
        recs.append(message_record(
            qp,
            packets=rng.randrange(2, 10),
            last_words=rng.randrange(1, 257),
            va=rng.randrange(16384),
            off={1: 4, 2: -1, 3: 1}.get(kind, 0),
            psn_step={4: 3, 5: 5, 6: 6}.get(kind, 4),
            key={7: 1, 8: 2}.get(kind, 0),
            fix=kind == 9,
            end=rng.random() < 0.2,
            muts=[(rng.randrange(120), 1 << rng.randrange(8))] if kind in (9, 10) else ()))
    seed(f"messages_mixed_{n}", rng.randrange(8), recs)
