"""Compares two DDP training runs of tests/dropin/torch_ddp.py (--losses): every step's loss must agree within
1e-4 of the reference's. Prints the largest relative difference and both median step times.
Usage: compare_losses.py REFERENCE.json OTHER.json   (exit 0 when they agree)
"""
import json
import sys


def main():
    with open(sys.argv[1]) as f:
        ref = json.load(f)
    with open(sys.argv[2]) as f:
        other = json.load(f)
    a, b = ref["losses"], other["losses"]
    if len(a) != len(b) or not a:
        print(f"FAIL: {len(a)} steps against {len(b)}")
        return 1
    worst, at = max((abs(x - y) / max(abs(x), 1e-30), i) for i, (x, y) in enumerate(zip(a, b)))
    ok = worst <= 1e-4
    print(f"{'ok' if ok else 'FAIL'}: losses of {len(a)} DDP steps, {other['backend']} against {ref['backend']}: "
          f"largest relative difference {worst:.2e} (step {at}); median step time {ref['step_ms']:.3f} ms "
          f"({ref['backend']}) against {other['step_ms']:.3f} ms ({other['backend']})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
