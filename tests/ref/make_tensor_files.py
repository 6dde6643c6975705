#!/usr/bin/python3
"""Writes the tensor files tests/test_tensor_files.cpp reads, and the values they must read as.

Usage: make_tensor_files.py FORMAT OUTDIR, FORMAT one of the generators registered below with
@generator (each writes only under OUTDIR, which exists). Run at test time by the C++ test.

Shared output conventions, so the C++ side reads every format the same way:
  <set>.txt   one line per tensor, in the order the reader's entries() must list them:
              NAME DTYPE FILE EXPECTED NDIM DIM...   (FILE and EXPECTED relative to OUTDIR;
              EXPECTED is '-' for a tensor read_f32 must refuse)
  EXPECTED    the tensor's values widened to f32, raw little-endian, row-major
"""
import json
import os
import struct
import sys

import numpy as np

GENERATORS = {}


def generator(name):
    def register(fn):
        GENERATORS[name] = fn
        return fn
    return register


def write_manifest(out, set_name, rows):
    """rows: (name, dtype, file, f32 values or None, shape), in entries() order."""
    os.makedirs(os.path.join(out, set_name + '.expected'), exist_ok=True)
    with open(os.path.join(out, set_name + '.txt'), 'w') as f:
        for name, dtype, file, values, shape in rows:
            expected = '-'
            if values is not None:
                expected = os.path.join(set_name + '.expected', name + '.f32')
                np.ascontiguousarray(values, dtype='<f4').tofile(os.path.join(out, expected))
            f.write(' '.join([name, dtype, file, expected, str(len(shape))] + [str(d) for d in shape]) + '\n')


# ---- safetensors -------------------------------------------------------------------------------

def st_header(path):
    """The header of a safetensors file, as written (key order kept)."""
    with open(path, 'rb') as f:
        (n,) = struct.unpack('<Q', f.read(8))
        return json.loads(f.read(n))


def st_data_order(path):
    """Tensor names in the order of their data (header order for ties): what entries() lists."""
    h = st_header(path)
    names = [k for k in h if k != '__metadata__']
    return sorted(names, key=lambda k: h[k]['data_offsets'][0])  # sorted() is stable


def st_write_raw(path, header, data, header_len=None):
    """A safetensors file from parts, for headers the safetensors package would never write."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text) if header_len is None else header_len))
        f.write(text)
        f.write(data)


def st_bits16(rng, n, nan_quiet_bit):
    """n random 16-bit patterns over the whole range (so F16 subnormals, infs and NaNs appear), NaNs
    made quiet: a signalling NaN's widening is left to the converter (hardware quiets it)."""
    u = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    exp_mask = 0x7c00 if nan_quiet_bit == 0x200 else 0x7f80
    nan = ((u & exp_mask) == exp_mask) & ((u & (nan_quiet_bit * 2 - 1)) != 0)
    u[nan] |= nan_quiet_bit
    return u


def st_f16(rng, shape):
    import torch
    n = int(np.prod(shape))
    u = st_bits16(rng, n, 0x200)
    # The edges first: smallest and largest subnormal, both zeros, infs, a NaN, the largest half.
    edges = np.array([0x0001, 0x03ff, 0x8001, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7bff, 0x0400, 0xfe01],
                     dtype=np.uint16)
    u[:min(n, len(edges))] = edges[:n]
    t = torch.from_numpy(u.view(np.int16).reshape(shape)).view(torch.float16)
    # numpy's bitwise widening must agree with torch's: two references, one answer.
    wide = t.float().numpy()
    assert np.array_equal(wide.view(np.uint32), u.view(np.float16).astype(np.float32).reshape(shape).view(np.uint32))
    return t, wide


def st_bf16(rng, shape):
    import torch
    n = int(np.prod(shape))
    u = st_bits16(rng, n, 0x40)
    edges = np.array([0x0001, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f7f, 0x0080], dtype=np.uint16)
    u[:min(n, len(edges))] = edges[:n]
    t = torch.from_numpy(u.view(np.int16).reshape(shape)).view(torch.bfloat16)
    return t, t.float().numpy()


def st_f32(rng, shape):
    import torch
    v = rng.standard_normal(size=shape).astype(np.float32)
    flat = v.reshape(-1)
    edges = np.array([np.inf, -np.inf, np.nan, -0.0, 1e-45], dtype=np.float32)
    flat[:min(flat.size, len(edges))] = edges[:flat.size]
    return torch.from_numpy(v), v


def st_rows(out, path, tensors):
    """Manifest rows for a file written from `tensors` ({name: (torch tensor, f32 values or None)})."""
    rel = os.path.relpath(path, out)
    h = st_header(path)
    return [(n, h[n]['dtype'], rel, tensors[n][1], h[n]['shape']) for n in st_data_order(path)]


@generator('safetensors')
def make_safetensors(out):
    import torch
    from safetensors.torch import save_file

    rng = np.random.default_rng(20240611)

    # (a) One file of odd shapes. The big ones cross the reader's 1 MiB read chunk.
    t = {
        'model.embed_tokens.weight': st_f32(rng, (37, 19)),
        'model.layers.0.attn.bias': st_f32(rng, (101,)),
        'model.layers.0.mlp.up_proj.weight': st_bf16(rng, (3, 5, 7)),
        'model.layers.0.mlp.down_proj.weight': st_f16(rng, (13, 11)),
        'big.f32': st_f32(rng, (300007,)),
        'big.bf16': st_bf16(rng, (600001,)),
        'big.f16': st_f16(rng, (3, 250007)),
        'scalar.f16': st_f16(rng, ()),
        'empty.f32': st_f32(rng, (4, 0, 3)),
    }
    steps = torch.arange(5, dtype=torch.int64)
    t['steps.i64'] = (steps, None)
    t['double.f64'] = (torch.ones(2, 3, dtype=torch.float64), None)
    path = os.path.join(out, 'single.safetensors')
    save_file({k: v[0] for k, v in t.items()}, path, metadata={'format': 'pt'})
    write_manifest(out, 'single', st_rows(out, path, t))

    # A header written by hand: no __metadata__, no padding (the data start at an odd offset),
    # keys out of data order, and an F8 tensor that is listed but not read.
    late = np.arange(4, dtype=np.float32) - 1.5
    hand = {
        'late.f32': {'dtype': 'F32', 'shape': [2, 2], 'data_offsets': [8, 24]},
        'zero.f16': {'dtype': 'F16', 'shape': [0], 'data_offsets': [24, 24]},
        'f8.e4m3': {'dtype': 'F8_E4M3', 'shape': [8], 'data_offsets': [0, 8]},
    }
    path = os.path.join(out, 'handmade.safetensors')
    st_write_raw(path, hand, bytes(range(8)) + late.astype('<f4').tobytes())
    write_manifest(out, 'handmade', [('f8.e4m3', 'F8_E4M3', 'handmade.safetensors', None, [8]),
                                     ('late.f32', 'F32', 'handmade.safetensors', late, [2, 2]),
                                     ('zero.f16', 'F16', 'handmade.safetensors', np.zeros(0, np.float32), [0])])

    # (b) A sharded set in Hugging Face's layout. Shard 2 also holds a tensor the index does not
    # name, which the reader leaves out.
    os.makedirs(os.path.join(out, 'sharded'))
    shards = {
        'model-00001-of-00002.safetensors': {
            'model.embed_tokens.weight': st_bf16(rng, (11, 6)),
            'model.layers.0.mlp.up_proj.weight': st_f32(rng, (6, 9)),
        },
        'model-00002-of-00002.safetensors': {
            'model.layers.1.mlp.up_proj.weight': st_f16(rng, (9, 6)),
            'lm_head.weight': st_f32(rng, (11, 6)),
            'extra.unlisted': st_f32(rng, (2,)),
        },
    }
    weight_map, total, rows = {}, 0, []
    for file, tensors in shards.items():
        path = os.path.join(out, 'sharded', file)
        save_file({k: v[0] for k, v in tensors.items()}, path, metadata={'format': 'pt'})
        listed = {k: v for k, v in tensors.items() if k != 'extra.unlisted'}
        for k, v in listed.items():
            weight_map[k] = file
            total += v[0].numel() * v[0].element_size()
        rows += [r for r in st_rows(out, path, tensors) if r[0] in listed]
    index = {'metadata': {'total_size': total}, 'weight_map': dict(sorted(weight_map.items()))}
    with open(os.path.join(out, 'sharded', 'model.safetensors.index.json'), 'w') as f:
        json.dump(index, f, indent=2)
    write_manifest(out, 'sharded', rows)

    # (c) Bad files; tests/test_tensor_files.cpp knows what each must say.
    bad = os.path.join(out, 'bad')
    os.makedirs(bad)
    two = {'a.weight': torch.ones(10), 'b.weight': torch.ones(1000)}
    save_file(two, os.path.join(bad, 'good.safetensors'))
    with open(os.path.join(bad, 'good.safetensors'), 'rb') as f:
        good = f.read()
    with open(os.path.join(bad, 'truncated.safetensors'), 'wb') as f:  # cut in b.weight's 4000 bytes
        f.write(good[:len(good) - 2000])
    with open(os.path.join(bad, 'header_past_end.safetensors'), 'wb') as f:
        f.write(struct.pack('<Q', len(good)) + good[8:])
    with open(os.path.join(bad, 'short.safetensors'), 'wb') as f:
        f.write(b'\x10\x00\x00')
    st_write_raw(os.path.join(bad, 'bad_json.safetensors'),
                 b'{"a.weight": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]', bytes(8))
    st_write_raw(os.path.join(bad, 'size_mismatch.safetensors'),
                 {'w.size': {'dtype': 'F16', 'shape': [3, 4], 'data_offsets': [0, 20]}}, bytes(24))
    st_write_raw(os.path.join(bad, 'negative_dim.safetensors'),
                 {'w.negative': {'dtype': 'F32', 'shape': [2, -3], 'data_offsets': [0, 0]}}, b'')
    st_write_raw(os.path.join(bad, 'missing_field.safetensors'),
                 {'w.nooffsets': {'dtype': 'F32', 'shape': [2]}}, bytes(8))
    st_write_raw(os.path.join(bad, 'unknown_dtype.safetensors'),
                 {'w.quant': {'dtype': 'Q4_K', 'shape': [32], 'data_offsets': [0, 18]}}, bytes(18))
    # Two tensors over the same bytes, or bytes no tensor owns: the safetensors library refuses both.
    st_write_raw(os.path.join(bad, 'overlap.safetensors'),
                 {'w.first': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]},
                  'w.second': {'dtype': 'F32', 'shape': [2], 'data_offsets': [4, 12]}}, bytes(12))
    st_write_raw(os.path.join(bad, 'gap.safetensors'),
                 {'w.first': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]},
                  'w.second': {'dtype': 'F32', 'shape': [2], 'data_offsets': [12, 20]}}, bytes(20))
    # data_offsets nested 300,000 deep: once a stack overflow in the error's dump of the value.
    deep = 300000
    st_write_raw(os.path.join(bad, 'deep.safetensors'),
                 b'{"w.deep": {"dtype": "F32", "shape": [2], "data_offsets": ' + b'[' * deep + b']' * deep + b'}}', bytes(8))
    for folder, wmap in [('missing_shard', {'a.weight': 'model-00001-of-00002.safetensors',
                                            'b.weight': 'model-00002-of-00002.safetensors'}),
                         ('absent_tensor', {'a.weight': 'model-00001-of-00002.safetensors',
                                            'ghost.weight': 'model-00001-of-00002.safetensors'})]:
        os.makedirs(os.path.join(bad, folder))
        save_file({'a.weight': torch.ones(10)}, os.path.join(bad, folder, 'model-00001-of-00002.safetensors'))
        with open(os.path.join(bad, folder, 'model.safetensors.index.json'), 'w') as f:
            json.dump({'metadata': {'total_size': 80}, 'weight_map': wmap}, f)


# ---- gguf: the gguf package (llama.cpp's gguf-py) ----------------------------------------------
# good.gguf holds every type files/gguf_file.cpp dequantizes, in 1-D, 2-D and 3-D shapes (numpy
# order, outermost first; GGUF stores them reversed), and metadata of every value type. Expected
# values come from reading each file back with GGUFReader and gguf.quants.dequantize. The other
# files are good.gguf with one thing broken, or a Q6_K tensor that opens but is not read.

def gguf_tensors():
    import gguf
    Q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(20250207)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    # (name, values, ggml type); Q4_1's data sits off zero so its minimum m is not ~ -max.
    return [
        ('f32_1d', f32(7), Q.F32),
        ('f32_2d', f32(3, 5), Q.F32),
        ('f32_3d', f32(2, 3, 4), Q.F32),
        ('f16_2d', f32(4, 6), Q.F16),
        ('bf16_2d', f32(3, 7), Q.BF16),
        ('q8_0_1d', f32(64), Q.Q8_0),
        ('q8_0_2d', f32(3, 64), Q.Q8_0),
        ('q4_0_1d', f32(96), Q.Q4_0),
        ('q4_0_2d', f32(5, 32), Q.Q4_0),
        ('q4_1_1d', f32(32) + 1.5, Q.Q4_1),
        ('q4_1_2d', f32(3, 96) * 2 - 0.75, Q.Q4_1),
        ('q8_0_big', f32(500, 2048), Q.Q8_0),  # more blocks than the reader stages at once
    ]


def gguf_metadata(w):
    import gguf
    w.add_string('general.name', 'ztrain test')
    w.add_uint32('llama.block_count', 2)
    w.add_float32('llama.rope.freq_base', 10000.0)
    w.add_uint8('test.u8', 200)
    w.add_int8('test.i8', -100)
    w.add_uint16('test.u16', 60000)
    w.add_int16('test.i16', -30000)
    w.add_uint32('test.u32', 4000000000)
    w.add_int32('test.i32', -2000000000)
    w.add_uint64('test.u64', 2**63 + 5)  # does not fit int64
    w.add_int64('test.i64', -(2**40))
    w.add_float32('test.f32', 0.125)
    w.add_float64('test.f64', 3.141592653589793)
    w.add_bool('test.bool', True)
    w.add_array('tokenizer.ggml.tokens', ['<s>', 'hello', 'w\u00f6rld', '', ' space'])
    w.add_array('tokenizer.ggml.merges', ['h e', 'l l'])
    w.add_array('tokenizer.ggml.token_type', [1, 2, 3, -4])
    w.add_array('tokenizer.ggml.scores', [0.5, -1.25])
    w.add_key_value('test.nested', [[1, 2], [3, 4, 5]], gguf.GGUFValueType.ARRAY)


def gguf_write(path, tensors, alignment=None, metadata=True):
    """A GGUF file of `tensors` ((name, values or raw bytes, ggml type)) through GGUFWriter."""
    import gguf
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(path, 'llama')
    if alignment is not None:
        w.add_custom_alignment(alignment)
    if metadata:
        gguf_metadata(w)
    for name, values, qtype in tensors:
        if qtype == Q.F32:
            w.add_tensor(name, values)
        elif qtype == Q.F16:
            w.add_tensor(name, values.astype(np.float16))
        elif values.dtype == np.uint8:  # raw blocks already
            w.add_tensor(name, values, raw_dtype=qtype)
        else:  # BF16 and the block types: bytes, the shape recovered from the byte shape
            w.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_rows(out, path):
    """Manifest rows for a GGUF file, its values as gguf-py dequantizes them (None where it cannot)."""
    import gguf
    rows = []
    for t in gguf.GGUFReader(path).tensors:
        try:
            values = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)
        except NotImplementedError:
            values = None
        if t.tensor_type == gguf.GGMLQuantizationType.Q6_K:
            values = None  # ztrain refuses it: nothing to compare
        shape = [int(d) for d in reversed(t.shape.tolist())]
        rows.append((t.name, t.tensor_type.name, os.path.relpath(path, out), values, shape))
    return rows


def gguf_tensor_info(data, name):
    """Byte offset of tensor `name`'s n_dims field in a GGUF header (just past its name)."""
    key = struct.pack('<Q', len(name)) + name.encode()
    at = data.find(key)
    assert at >= 0 and data.find(key, at + 1) < 0, name
    return at + len(key)


def gguf_patch(data, at, fmt, value):
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


@generator('gguf')
def make_gguf(out):
    import gguf
    Q = gguf.GGMLQuantizationType
    tensors = gguf_tensors()
    good = os.path.join(out, 'good.gguf')
    gguf_write(good, tensors)
    write_manifest(out, 'good', gguf_rows(out, good))
    # A 64-byte general.alignment and no other metadata.
    path = os.path.join(out, 'aligned64.gguf')
    gguf_write(path, tensors[:6], alignment=64, metadata=False)
    write_manifest(out, 'aligned64', gguf_rows(out, path))
    # A type ztrain lists but does not dequantize (arbitrary block bytes), beside one it does.
    path = os.path.join(out, 'q6_k.gguf')
    gguf_write(path, [('blk.0.ffn_down.weight', np.arange(2 * 210, dtype=np.uint8).reshape(2, 210), Q.Q6_K),
                      tensors[0]], metadata=False)
    write_manifest(out, 'q6_k', gguf_rows(out, path))

    with open(good, 'rb') as f:
        data = f.read()
    # Version 2 has version 3's layout in a little-endian file.
    with open(os.path.join(out, 'v2.gguf'), 'wb') as f:
        f.write(gguf_patch(data, 4, '<I', 2))
    reader = gguf.GGUFReader(good)
    last = reader.tensors[-1]
    at = gguf_tensor_info(data, 'q8_0_2d')  # n_dims = 2, dims (64, 3), type, offset
    offset = struct.unpack_from('<Q', data, at + 4 + 16 + 4)[0]
    bad = {
        'bad_magic.gguf': b'GGUX' + data[4:],
        'bad_version.gguf': gguf_patch(data, 4, '<I', 4),
        'version1.gguf': gguf_patch(data, 4, '<I', 1),
        'huge_tensor_count.gguf': gguf_patch(data, 8, '<Q', 1 << 40),
        'huge_string.gguf': gguf_patch(data, 24, '<Q', 1 << 50),  # the first key's length
        'truncated_header.gguf': data[:reader.data_offset - 40],  # in the last tensor info
        'truncated_data.gguf': data[:last.data_offset + last.n_bytes // 2],
        'unknown_type.gguf': gguf_patch(data, at + 4 + 16, '<I', 99),
        'removed_type.gguf': gguf_patch(data, at + 4 + 16, '<I', 4),  # ggml's old Q4_2
        'bad_row.gguf': gguf_patch(data, at + 4, '<Q', 40),  # Q8_0 rows of 40 elements
        'misaligned.gguf': gguf_patch(data, at + 4 + 16 + 4, '<Q', offset + 4),
        # q8_0_2d's data at the previous tensor's offset: two tensors over the same bytes.
        'overlap.gguf': gguf_patch(data, at + 4 + 16 + 4, '<Q', reader.tensors[5].data_offset - reader.data_offset),
    }
    for name, contents in bad.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(contents)


# ---- other formats' generators go above this line ----------------------------------------------

def main():
    if len(sys.argv) != 3 or sys.argv[1] not in GENERATORS:
        sys.exit('usage: make_tensor_files.py {%s} OUTDIR' % ','.join(sorted(GENERATORS)))
    os.makedirs(sys.argv[2], exist_ok=True)
    GENERATORS[sys.argv[1]](sys.argv[2])


if __name__ == '__main__':
    main()
