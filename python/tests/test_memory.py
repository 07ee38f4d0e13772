"""A 1 GiB input is read in place: the call's peak memory stays far below
a copy of it (measured in a child process, so that the peak is the call's).
A view whose elements do not lie row-major (here reversed) is packed once
by the runtime for the kernels, as the Rust API does: that call's peak
grows by the input's size, and no more."""

import subprocess
import sys
import textwrap


def test_a_large_input_is_not_copied():
    script = textwrap.dedent(
        """
        import resource
        import numpy as np
        import nax
        m = nax.compile("def total(x: [n]) -> [] {\\n    return sum(x, n)\\n}\\n", threads=1)
        m.total(np.ones(8, np.float32))
        x = np.ones(1 << 28, np.float32)  # 1 GiB, every page touched
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        total = float(np.asarray(m.total(x[::1])))
        in_place = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        reversed_total = float(np.asarray(m.total(x[::-1])))
        packed = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(total, reversed_total, (in_place - before) // 1024, (packed - in_place) // 1024)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    total, reversed_total, in_place_mib, packed_mib = out.stdout.split()
    assert float(total) == float(1 << 28) == float(reversed_total)
    assert int(in_place_mib) < 64, f"the call's peak grew by {in_place_mib} MiB for a 1 GiB input"
    assert int(packed_mib) < 1024 + 64, f"packing a reversed 1 GiB input grew the peak by {packed_mib} MiB"


def test_a_broadcast_too_large_for_memory_is_refused_before_it_is_packed():
    """One bool broadcast to 2^32 elements by a zero stride, under an 8 GiB
    address-space limit: the 32 GiB result is refused before the broadcast
    is packed (4 GiB, once made before the memory plan decided): in well
    under a second, the process under 1 GiB resident."""
    script = textwrap.dedent(
        """
        import resource, time
        import numpy as np
        import nax
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
        m = nax.compile("def cnt(x: Mask[n]) -> Int[n] {\\n    return int(x) + 1\\n}\\n")
        big = np.lib.stride_tricks.as_strided(np.ones(1, dtype=bool), shape=(1 << 32,), strides=(0,))
        start = time.monotonic()
        try:
            m.cnt(big)
            outcome = "ran"
        except nax.Error as e:
            outcome = "refused" if "bytes of memory at its peak" in str(e) else "other: " + str(e)
        seconds = time.monotonic() - start
        # VmHWM: this process's own peak (ru_maxrss counts the parent's at fork).
        status = open("/proc/self/status").read()
        peak_kib = int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1])
        print(outcome, seconds, peak_kib // 1024)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    outcome, seconds, peak_mib = out.stdout.rsplit(None, 2)
    assert outcome == "refused", out.stdout
    assert float(seconds) < 1.0, f"the refusal took {seconds} s"
    assert int(peak_mib) < 1024, f"the process reached {peak_mib} MiB resident"
