"""Reads the event file that write_events (tests/cli/write_events.cpp) wrote with zerotrain's
TensorBoard writer, using TensorBoard's own reader, and checks every tag, step and value
against the expected.json written beside it. Values are compared as float32: TensorBoard's
scalars are stored as `simple_value` (a float).

    tensorboard_read_test.py WRITE_EVENTS WORK_DIR

Exit status 0 when everything matches, 1 with one line per difference, 77 (skipped) when
the tensorboard package is not installed.
"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys


def as_float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def main():
    write_events, work_dir = sys.argv[1], sys.argv[2]
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        print(f"tensorboard_read_test.py: skipped, the tensorboard package is not importable by "
              f"{sys.executable} ({e}); scripts/setup.sh installs it")
        return 77

    shutil.rmtree(work_dir, ignore_errors=True)
    subprocess.run([write_events, work_dir], check=True)
    with open(os.path.join(work_dir, "expected.json")) as f:
        expected = json.load(f)
    files = glob.glob(os.path.join(work_dir, "events.out.tfevents.*"))
    if len(files) != 1:
        print(f"tensorboard_read_test.py: expected one event file in {work_dir}, found {files}")
        return 1

    # size_guidance 0: keep every scalar (the default samples down to 10,000 per tag).
    acc = EventAccumulator(work_dir, size_guidance={"scalars": 0})
    acc.Reload()
    problems = []
    tags = sorted(acc.Tags()["scalars"])
    if tags != sorted(expected):
        problems.append(f"tags: TensorBoard read {tags}, written {sorted(expected)}")
    for tag in sorted(expected):
        if tag not in tags:
            continue
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        want = [(step, as_float32(value)) for step, value in expected[tag]]
        if len(got) != len(want):
            problems.append(f"{tag}: {len(got)} points read, {len(want)} written")
        for (gs, gv), (ws, wv) in zip(got, want):
            if gs != ws or gv != wv:
                problems.append(f"{tag}: read step {gs} value {gv!r}, written step {ws} value {wv!r}")
    for p in problems[:50]:
        print("tensorboard_read_test.py: " + p)
    if problems:
        return 1
    count = sum(len(v) for v in expected.values())
    print(f"tensorboard_read_test.py: TensorBoard read {count} scalars of {len(expected)} tags back exactly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
