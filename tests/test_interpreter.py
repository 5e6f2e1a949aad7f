"""rooflab.interpreter: the set-up every interpreter run (tests, the verify rule) goes through."""
import os
import subprocess
import sys

from rooflab.interpreter import AVX512_FEATURES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# NumPy's SIMD targets in use: those it was built to dispatch that the CPU has and are not disabled
IN_USE = ("from numpy._core import _multiarray_umath as m; "
          "print(' '.join(f for f in m.__cpu_dispatch__ if m.__cpu_features__.get(f)))")


def _fresh(code: str, **env) -> list[str]:
    environ = {k: v for k, v in os.environ.items() if k != "NPY_DISABLE_CPU_FEATURES"} | env
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, check=True,
                          capture_output=True, text=True).stdout.splitlines()


def test_enable_keeps_numpy_off_avx512_when_numpy_is_not_yet_imported():
    setting, in_use = _fresh("from rooflab import interpreter; interpreter.enable(); import os; "
                             "print(os.environ['NPY_DISABLE_CPU_FEATURES']); " + IN_USE)
    assert setting == AVX512_FEATURES
    assert not {"X86_V4", "AVX512F", "AVX512_SKX", "AVX512_ICL"} & set(in_use.split())


def test_enable_leaves_a_choice_already_made_alone():
    assert _fresh("from rooflab import interpreter; interpreter.enable(); import os; "
                  "print(os.environ['NPY_DISABLE_CPU_FEATURES'])", NPY_DISABLE_CPU_FEATURES="AVX512_SPR") == ["AVX512_SPR"]
