#!/usr/bin/env python3
"""compare_costs.py EXPLAIN.json DEARER CHEAPER: the function instance whose label starts
with DEARER must have a larger modelled cost (compute + communication, `per_run.cost_s`)
than the one starting with CHEAPER, while its communication alone is smaller; each
instance's cost must be the sum of its compute and communication, and the program's too.
(The flops of one instance are checked against a hand count in compute_cost.msh.)"""
import json
import sys


def find(doc, prefix):
    found = [f for f in doc["functions"] if f["label"].startswith(prefix)]
    assert len(found) == 1, (prefix, [f["label"] for f in doc["functions"]])
    return found[0]


def faster(slow_path, fast_path):
    """Every instance's compute on the second device model is below the first's, its
    communication the same."""
    slow, fast = json.load(open(slow_path)), json.load(open(fast_path))
    assert fast["program"]["device"] != slow["program"]["device"]
    for a, b in zip(slow["functions"], fast["functions"]):
        assert a["label"] == b["label"]
        assert abs(a["communication_s"] - b["communication_s"]) <= 1e-15, a["label"]
        if a["compute_s"] > 0:
            assert b["compute_s"] < a["compute_s"], (a["label"], a["compute_s"], b["compute_s"])
    print(f"{fast['program']['device']}: compute {fast['program']['compute_s'] * 1e6:.2f} us "
          f"against {slow['program']['compute_s'] * 1e6:.2f} us on {slow['program']['device']}")


def main():
    if sys.argv[1] == "--faster":
        return faster(sys.argv[2], sys.argv[3])
    doc = json.load(open(sys.argv[1]))
    dear, cheap = find(doc, sys.argv[2]), find(doc, sys.argv[3])
    for f in (dear, cheap):
        per = f["per_run"]
        assert abs(per["cost_s"] - (per["compute_s"] + per["communication_s"])) <= 1e-12 + 1e-9 * per["cost_s"], per
        assert f["cost_s"] == per["cost_s"] and f["compute_s"] == per["compute_s"], f["label"]
        assert per["compute_s"] > 0 and per["flops"] > 0, per
    d, c = dear["per_run"], cheap["per_run"]
    assert d["communication_s"] < c["communication_s"], ("communication alone prefers the replicated step", d, c)
    assert d["cost_s"] > c["cost_s"], ("the replicated step must cost more", d, c)
    # The replicated step's contractions are 4x Megatron's per device (model = 4): its
    # flops are at least 3x (element-wise work is split alike in both).
    assert d["flops"] > 3 * c["flops"], (d["flops"], c["flops"])
    prog = doc["program"]
    assert abs(prog["cost_s"] - (prog["compute_s"] + prog["communication_s"])) <= 1e-12 + 1e-9 * prog["cost_s"], prog
    print(f"replicated {d['cost_s'] * 1e6:.1f} us (compute {d['compute_s'] * 1e6:.1f}) > "
          f"Megatron {c['cost_s'] * 1e6:.1f} us (compute {c['compute_s'] * 1e6:.1f})")


if __name__ == "__main__":
    main()
