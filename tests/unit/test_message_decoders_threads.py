"""Threads that decode their first message of a type at the same moment do not crash the process.

msgspec builds a Struct type's decoding information lazily and not atomically; two threads building
decoders of the same types at once could use half-built information and die of SIGSEGV in
msgspec._core (a controller's API threads decoding their first AlterIsr together, seen in the F25
scenario). The check runs in a child process: a crash there is a failed test, not a lost worker.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from scripts.devservices import REPO_ROOT

CHILD = textwrap.dedent(
    """
    import sys, threading
    from typing import Optional

    import msgspec

    from controller_core.protocol import messages

    sys.setswitchinterval(1e-6)  # switch threads as often as possible: widens the race's window


    def fresh_message_type(fields: int) -> type:
        # New classes each round: msgspec has built nothing for them yet.
        ns = {"msgspec": msgspec, "Optional": Optional, "__name__": "__main__"}
        code = [
            f"class Leaf{i}(msgspec.Struct, frozen=True):\\n"
            "    a: int\\n    b: tuple[int, ...] = ()\\n    c: Optional[str] = None\\n"
            for i in range(fields)
        ]
        fields_of_top = "".join(f"    f{i}: Leaf{i}\\n" for i in range(fields))
        code.append("class Top(msgspec.Struct, frozen=True):\\n" + fields_of_top)
        exec("\\n".join(code), ns)
        return ns["Top"]


    for _ in range(int(sys.argv[1])):
        top = fresh_message_type(30)
        body = msgspec.json.encode({f"f{i}": {"a": i, "b": [1, 2], "c": "x"} for i in range(30)})
        start = threading.Barrier(6)
        decoded = []

        def first_decode() -> None:
            start.wait()
            decoded.append(messages.decode(body, top, "test message"))

        threads = [threading.Thread(target=first_decode) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(decoded) == 6 and all(d.f29.a == 29 for d in decoded), decoded
    print("decoded")
    """
)


def test_first_decodes_of_a_type_in_six_threads_at_once_do_not_crash() -> None:
    # Without the decoders' lock this child died of SIGSEGV (exit -11) in each of three tries.
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "150"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "decoded", (done.returncode, done.stderr[-2000:])
