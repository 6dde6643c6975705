// Token and position embeddings: out (B,T,C) = wte[inp - row0] + wpe[t], and the backward into
// dwte's rows and dwpe. Twins of kernels/cpu/encoder.cpp. N = B*T positions.
//
// [Note: deterministic encoder backward] dwpe[t] sums dout[b,t] over b: one thread per
// (t, channels) adds them in b order. dwte's rows repeat across positions (a token occurs many
// times in a batch), and float atomics would add the repeats in an order that changes run to
// run. So the positions are sorted by their row on the device (CUB's radix sort: stable, so each
// row's positions stay ascending, and no host synchronisation, so it runs inside a step), and the
// first position of each run of equal rows adds the whole run, in position order, into its row:
// each row of dwte has one writer and a fixed order of addition (the CPU twin's order, so f32
// results should agree bit for bit). A run is summed by one thread per channel pack, eight positions in flight
// at a time: cheap for the runs of real text, slow only for a batch of one token repeated.
#include <cub/device/device_radix_sort.cuh>
#include <stdexcept>
#include <string>

#include "kernels/cuda/vec.cuh"

namespace zt::cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr int kRunUnroll = 8;  // positions of a run loaded at once

template <int W, class T>
__global__ void encoder_forward_kernel(T* out, const int32_t* inp, const T* wte, const T* wpe, int N, int T_, int C,
                                       int row0, int rows) {
  const int packs = C / W;
  const size_t total = size_t(N) * packs, stride = size_t{gridDim.x} * blockDim.x;
  for (size_t k = size_t{blockIdx.x} * blockDim.x + threadIdx.x; k < total; k += stride) {
    const int n = int(k / packs), c = int(k % packs) * W;
    const int r = inp[n] - row0;
    float o[W] = {};
    if (wte && r >= 0 && r < rows) load_f32<W>(o, wte + size_t(r) * C + c);
    if (wpe) {
      float p[W];
      load_f32<W>(p, wpe + size_t(n % T_) * C + c);
#pragma unroll
      for (int j = 0; j < W; ++j) o[j] += p[j];
    }
    store_f32<W>(out + size_t(n) * C + c, o);
  }
}

template <int W, class T>
__global__ void dwpe_kernel(T* dwpe, const T* dout, int B, int T_, int C) {
  const int packs = C / W;
  const size_t total = size_t(T_) * packs, stride = size_t{gridDim.x} * blockDim.x;
  for (size_t k = size_t{blockIdx.x} * blockDim.x + threadIdx.x; k < total; k += stride) {
    const size_t at = k / packs * C + k % packs * W;  // (t, c)
    float acc[W], d[W];
    load_f32<W>(acc, dwpe + at);
    for (int b = 0; b < B; ++b) {
      load_f32<W>(d, dout + size_t(b) * T_ * C + at);
#pragma unroll
      for (int j = 0; j < W; ++j) acc[j] += d[j];
    }
    store_f32<W>(dwpe + at, acc);
  }
}

// key: the position's row of dwte, or `rows` (sorted last, skipped) for tokens outside the range.
__global__ void row_keys_kernel(uint32_t* keys, int32_t* positions, const int32_t* inp, int N, int row0, int rows) {
  const int n = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (n >= N) return;
  const int r = inp[n] - row0;
  keys[n] = r >= 0 && r < rows ? uint32_t(r) : uint32_t(rows);
  positions[n] = n;
}

// One thread per (sorted index k, channel pack); the first index of each run of equal keys adds
// the run's dout rows, in order, into its dwte row.
template <int W, class T>
__global__ void dwte_runs_kernel(T* dwte, const T* dout, const uint32_t* keys, const int32_t* positions, int N, int C,
                                 int rows) {
  const int packs = C / W;
  const size_t total = size_t(N) * packs, stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int k = int(i / packs), c = int(i % packs) * W;
    const uint32_t key = keys[k];
    if (key >= uint32_t(rows) || (k > 0 && keys[k - 1] == key)) continue;
    float acc[W];
    load_f32<W>(acc, dwte + size_t(key) * C + c);
    for (int k0 = k;; k0 += kRunUnroll) {
      // Load the next kRunUnroll positions of the run together, then add them in order.
      bool in[kRunUnroll];
      float d[kRunUnroll][W];
#pragma unroll
      for (int u = 0; u < kRunUnroll; ++u) {
        in[u] = k0 + u < N && keys[k0 + u] == key;
        if (in[u]) load_f32<W>(d[u], dout + size_t(positions[k0 + u]) * C + c);
      }
#pragma unroll
      for (int u = 0; u < kRunUnroll; ++u)
        if (in[u])
#pragma unroll
          for (int j = 0; j < W; ++j) acc[j] += d[u][j];
      if (!in[kRunUnroll - 1]) break;
    }
    store_f32<W>(dwte + size_t(key) * C + c, acc);
  }
}

constexpr size_t kAlign = 256;
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Bits of the sort keys: enough for `rows` itself (the out-of-range key).
int key_bits(int rows) {
  int bits = 1;
  while (bits < 32 && (uint64_t{1} << bits) <= uint64_t(rows)) ++bits;
  return bits;
}

// The scratch layout: keys and positions in and out (N each), then CUB's temporary storage.
struct SortScratch {
  uint32_t* keys_in;
  uint32_t* keys_out;
  int32_t* pos_in;
  int32_t* pos_out;
  void* temp;
  size_t temp_bytes;
  size_t bytes;  // everything, with slack to align `scratch` itself
};

SortScratch sort_scratch(void* scratch, int N, int rows) {
  SortScratch s{};
  check(cub::DeviceRadixSort::SortPairs(nullptr, s.temp_bytes, s.keys_in, s.keys_out, s.pos_in, s.pos_out, N, 0,
                                        key_bits(rows)),
        "encoder_backward_scratch_bytes");
  const size_t array = round_up(size_t(N) * 4);
  s.bytes = kAlign + 4 * array + round_up(s.temp_bytes);
  if (scratch) {
    char* p = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(scratch)));
    s.keys_in = reinterpret_cast<uint32_t*>(p);
    s.keys_out = reinterpret_cast<uint32_t*>(p + array);
    s.pos_in = reinterpret_cast<int32_t*>(p + 2 * array);
    s.pos_out = reinterpret_cast<int32_t*>(p + 3 * array);
    s.temp = p + 4 * array;
  }
  return s;
}

// Elements per access: a 16-byte pack where C and the pointers allow it, else one.
template <class T>
int width(int C, const void* a, const void* b, const void* c) {
  return C % Pack<T>::n == 0 && aligned16(a) && aligned16(b) && aligned16(c) ? Pack<T>::n : 1;
}

}  // namespace

size_t encoder_backward_scratch_bytes(int B, int T_, int rows) { return sort_scratch(nullptr, B * T_, rows).bytes; }

template <class T>
void encoder_forward(T* out, const int32_t* inp, const T* wte, const T* wpe, int B, int T_, int C, int row0, int rows,
                     cudaStream_t s) {
  const int N = B * T_;
  if (N == 0 || C == 0) return;
  const int w = width<T>(C, out, wte, wpe);
  const auto kernel = w > 1 ? encoder_forward_kernel<Pack<T>::n, T> : encoder_forward_kernel<1, T>;
  kernel<<<blocks_for(size_t(N) * (C / w), kThreads), kThreads, 0, s>>>(out, inp, wte, wpe, N, T_, C, row0, rows);
  check_launch("encoder_forward");
}

template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int32_t* inp, int B, int T_, int C, int row0, int rows,
                      void* scratch, size_t scratch_bytes, cudaStream_t s) {
  const int N = B * T_;
  if (N == 0 || C == 0) return;
  if (dwpe) {
    const int w = width<T>(C, dwpe, dout, nullptr);
    const auto kernel = w > 1 ? dwpe_kernel<Pack<T>::n, T> : dwpe_kernel<1, T>;
    kernel<<<blocks_for(size_t(T_) * (C / w), kThreads), kThreads, 0, s>>>(dwpe, dout, B, T_, C);
    check_launch("encoder_backward (dwpe)");
  }
  if (!dwte || rows <= 0) return;
  const SortScratch sc = sort_scratch(scratch, N, rows);
  if (!scratch || scratch_bytes < sc.bytes)
    throw std::invalid_argument("encoder_backward: scratch of " + std::to_string(scratch_bytes) + " bytes, needs " +
                                std::to_string(sc.bytes) + " (encoder_backward_scratch_bytes)");
  row_keys_kernel<<<unsigned((N + kThreads - 1) / kThreads), kThreads, 0, s>>>(sc.keys_in, sc.pos_in, inp, N, row0,
                                                                               rows);
  check_launch("encoder_backward (keys)");
  size_t temp_bytes = sc.temp_bytes;
  check(cub::DeviceRadixSort::SortPairs(sc.temp, temp_bytes, sc.keys_in, sc.keys_out, sc.pos_in, sc.pos_out, N, 0,
                                        key_bits(rows), s),
        "encoder_backward (sort)");
  const int w = width<T>(C, dwte, dout, nullptr);
  const auto kernel = w > 1 ? dwte_runs_kernel<Pack<T>::n, T> : dwte_runs_kernel<1, T>;
  kernel<<<blocks_for(size_t(N) * (C / w), kThreads), kThreads, 0, s>>>(dwte, dout, sc.keys_out, sc.pos_out, N, C,
                                                                        rows);
  check_launch("encoder_backward (dwte)");
}

#define ZT_INSTANTIATE(T)                                                                                          \
  template void encoder_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int, int, int, cudaStream_t); \
  template void encoder_backward<T>(T*, T*, const T*, const int32_t*, int, int, int, int, int, void*, size_t,      \
                                    cudaStream_t);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(bf16)
#undef ZT_INSTANTIATE

}  // namespace zt::cuda
