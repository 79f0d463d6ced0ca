#!/usr/bin/env python3
"""Reads a burn-cockpit TensorBoard event directory with TensorBoard's own reader (the
`tensorboard` package's EventAccumulator) and checks every tag, step and value against the
Cockpit log it was written from: numbers as TensorBoard's float32 scalars, per-parameter
lists layer by layer, GradHist1d's edges and counts exactly (GradHist2d's gradient marginal).

Not a dependency of the project: run it from a scratch virtual environment,

    python3 -m venv /tmp/tb && /tmp/tb/bin/pip install tensorboard
    /tmp/tb/bin/python scripts/check_tensorboard.py LOG EVENT_DIR [--names a,b,c]

Exit status 0 when everything matches, 1 otherwise (each mismatch printed).
"""

import argparse
import json
import math
import sys

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def decode(obj):
    """json_tricks' numpy arrays as numpy arrays."""
    if isinstance(obj, dict) and "__ndarray__" in obj:
        return np.array(obj["__ndarray__"], dtype=float).reshape(obj.get("shape", [-1]))
    return obj


def read_log(path):
    """{step: {name: value}} of a Cockpit JSON log or JSON-lines stream."""
    steps = {}
    if path.endswith(".jsonl"):
        with open(path) as f:
            for line in f:
                if line.strip():
                    for step, values in json.loads(line, object_hook=decode)["output"].items():
                        steps.setdefault(int(step), {}).update(values)
    else:
        with open(path) as f:
            for step, values in json.load(f, object_hook=decode).items():
                if step.isdigit() and isinstance(values, dict):
                    steps[int(step)] = values
    return steps


def same(got, want):
    want = np.float32(want)
    return got == want or (math.isnan(got) and math.isnan(want))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("events")
    parser.add_argument("--names", default="")
    args = parser.parse_args()
    names = [n for n in args.names.split(",") if n]

    accumulator = EventAccumulator(args.events, size_guidance={"scalars": 0, "histograms": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    scalars = {
        tag: {e.step: e.value for e in accumulator.Scalars(tag)} for tag in tags["scalars"]
    }
    histograms = {
        tag: {e.step: e.histogram_value for e in accumulator.Histograms(tag)}
        for tag in tags["histograms"]
    }

    problems = []
    counted = {"scalar": 0, "per-layer": 0, "histogram": 0}

    def check_scalar(tag, step, want, kind):
        got = scalars.get(tag, {}).get(step)
        if got is None:
            problems.append(f"{tag} at step {step}: missing")
        elif not same(got, want):
            problems.append(f"{tag} at step {step}: {got} in TensorBoard, {want} in the log")
        else:
            counted[kind] += 1

    def check_histogram(tag, step, hist, edges):
        got = histograms.get(tag, {}).get(step)
        if got is None:
            problems.append(f"{tag} at step {step}: missing")
            return
        if list(got.bucket_limit) != list(edges):
            problems.append(f"{tag} at step {step}: limits differ from the log's edges")
        elif list(got.bucket) != [0.0] + list(hist):
            problems.append(f"{tag} at step {step}: counts differ from the log's")
        elif got.num != sum(hist):
            problems.append(f"{tag} at step {step}: num {got.num}, log {sum(hist)}")
        else:
            counted["histogram"] += 1

    for step, values in sorted(read_log(args.log).items()):
        for name, value in values.items():
            tag = f"cockpit/{name}"
            if isinstance(value, bool):
                continue
            if isinstance(value, (int, float)):
                check_scalar(tag, step, float(value), "scalar")
            elif isinstance(value, list) and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
            ):
                for i, v in enumerate(value):
                    layer = names[i] if i < len(names) else str(i)
                    check_scalar(f"{tag}/{layer}", step, float(v), "per-layer")
            elif isinstance(value, dict) and "hist" in value and "edges" in value:
                hist = np.asarray(value["hist"], dtype=float)
                edges = value["edges"]
                if hist.ndim == 1:
                    check_histogram(tag, step, hist.tolist(), np.asarray(edges).tolist())
                elif hist.ndim == 2:
                    check_histogram(
                        f"{tag}/gradients",
                        step,
                        hist.sum(axis=1).tolist(),
                        np.asarray(edges[0]).tolist(),
                    )

    print(
        f"TensorBoard {__import__('tensorboard').__version__} read {len(tags['scalars'])} scalar "
        f"tags and {len(tags['histograms'])} histogram tags; matched "
        f"{counted['scalar']} scalars, {counted['per-layer']} per-layer values and "
        f"{counted['histogram']} histograms of the log; {len(problems)} mismatches"
    )
    for problem in problems[:50]:
        print("  " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
