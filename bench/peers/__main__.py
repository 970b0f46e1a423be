"""``python -m bench.peers NAME ADDRESS``: run peer ``NAME``'s echo server on ``ADDRESS``."""

from __future__ import annotations

import sys

from bench.peers import load_peer


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m bench.peers NAME ADDRESS", file=sys.stderr)
        return 2
    name, address = argv
    load_peer(name).serve(address)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
