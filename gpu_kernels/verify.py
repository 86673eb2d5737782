"""Verification on the device, for stress runs that check every iteration without a host sync.

Three kernels over 32-bit words of any output buffer:
- ``compare``: counts the words of an output that differ from a reference copy (bit-exact:
  cuBLAS gives the same bits for the same call on the same GPU, stream and handle), adding
  the count to a device counter, as gpu-burn compares each result with the first;
- ``checksum``: a position-weighted sum mod 2^64 of the words, sum_i w_i * m(i) with an odd
  weight m(i) per position, so one changed word always changes it (odd times a nonzero
  difference is nonzero mod 2^64) and so does a word written to the wrong place;
- ``flip``: XORs one bit of one word, the injected corruption that proves both can fail.

Counters are uint64 device arrays: the host reads them when it chooses, never per launch.
"""

from __future__ import annotations

from typing import Any

from gpu_kernels import cuda

SOURCE = r"""
__device__ __forceinline__ unsigned long long weight(unsigned long long i) {
    return (i * 0x9E3779B97F4A7C15ull) | 1ull;
}

__device__ __forceinline__ void add_warp(unsigned long long v, unsigned long long* total) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0 && v) atomicAdd(total, v);
}

extern "C" __global__ void compare_words(const uint4* __restrict__ out,
                                         const uint4* __restrict__ ref, const long long n4,
                                         unsigned long long* __restrict__ mismatches) {
    unsigned long long bad = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;
         i += (long long)gridDim.x * blockDim.x) {
        const uint4 a = out[i], b = ref[i];
        bad += (a.x != b.x) + (a.y != b.y) + (a.z != b.z) + (a.w != b.w);
    }
    add_warp(bad, mismatches);
}

extern "C" __global__ void checksum_words(const uint4* __restrict__ p, const long long n4,
                                          unsigned long long* __restrict__ sum) {
    unsigned long long s = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;
         i += (long long)gridDim.x * blockDim.x) {
        const uint4 v = p[i];
        const unsigned long long w = 4ull * (unsigned long long)i;
        s += v.x * weight(w) + v.y * weight(w + 1) + v.z * weight(w + 2) + v.w * weight(w + 3);
    }
    add_warp(s, sum);
}

extern "C" __global__ void flip_bit(unsigned int* p, const long long word,
                                    const unsigned int mask) {
    if (threadIdx.x == 0 && blockIdx.x == 0) p[word] ^= mask;
}
"""
BLOCK = 256
MULTIPLIER = 0x9E3779B97F4A7C15


def words(array: Any) -> Any:
    """A contiguous device array as a flat array of uint32 words: a view, never a copy (a
    copy would be verified in place of what the kernels write)."""
    flat = array.ravel().view("uint32")
    if flat.nbytes % 16:
        raise ValueError(f"{flat.nbytes} bytes: verification needs a multiple of 16")
    pointer = getattr(getattr(array, "data", None), "ptr", None)  # CuPy's; numpy has none
    if pointer is not None and flat.data.ptr != pointer:
        raise ValueError("the array is not contiguous: its words would be a copy")
    return flat


def checksum_reference(host_words: Any) -> int:
    """The checksum of uint32 words on the host (numpy), as the device computes it."""
    import numpy as np

    w = np.asarray(host_words, dtype=np.uint64).ravel()
    idx = np.arange(w.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        weights = (idx * np.uint64(MULTIPLIER)) | np.uint64(1)
        return int(np.sum(w * weights, dtype=np.uint64))


class Verifier:
    """The three kernels, compiled once for the current device."""

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self._compare = cuda.compile_kernel(cp, SOURCE, "compare_words", {})
        self._checksum = cuda.compile_kernel(cp, SOURCE, "checksum_words", {})
        self._flip = cuda.compile_kernel(cp, SOURCE, "flip_bit", {})
        self.grid = cuda.sm_count(cp) * cuda.blocks_per_sm(cp, self._compare, BLOCK)

    def compare(self, out: Any, ref: Any, counter: Any) -> None:
        """Add to ``counter`` (a 1-element uint64 view) the words where ``out`` != ``ref``."""
        n4 = self.cp.int64(out.size // 4)
        self._compare((self.grid,), (BLOCK,), (out, ref, n4, counter))

    def checksum(self, data: Any, acc: Any) -> None:
        """Add the checksum of ``data`` (uint32 words) to ``acc`` (a 1-element uint64 view)."""
        self._checksum((self.grid,), (BLOCK,), (data, self.cp.int64(data.size // 4), acc))

    def flip(self, data: Any, word: int, bit: int) -> None:
        """XOR bit ``bit`` of word ``word`` of ``data`` (uint32 words), on the stream."""
        self._flip((1,), (32,), (data, self.cp.int64(word), self.cp.uint32(1 << bit)))
