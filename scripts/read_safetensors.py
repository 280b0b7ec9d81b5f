#!/usr/bin/env python3
"""Reads a safetensors file (as `ponder export` writes it) with numpy only.

    python3 scripts/read_safetensors.py model.safetensors          # lists name, dtype, shape, L2 norm
    from read_safetensors import load; tensors, meta = load(path)   # dict name -> numpy array, metadata dict

Checks what the format promises: the header length fits the file, every tensor's byte range lies inside the data
section, ranges do not overlap and cover it exactly, and each range holds dtype size x product(shape) bytes."""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "F16": np.float16}


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: %d bytes, too short for a safetensors header" % (path, len(raw)))
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError("%s: header length %d runs past the end of the file (%d bytes)" % (path, n, len(raw)))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors, spans = {}, []
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = np.dtype(DTYPES[info["dtype"]]).newbyteorder("<")
        count = int(np.prod(info["shape"], dtype=np.int64))
        if not 0 <= begin <= end <= len(data) or end - begin != count * dtype.itemsize:
            raise ValueError("%s: tensor %s: byte range [%d, %d) does not hold %s %s" %
                             (path, name, begin, end, info["dtype"], info["shape"]))
        tensors[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
        spans.append((begin, end))
    spans.sort()
    covered = 0
    for begin, end in spans:
        if begin != covered:
            raise ValueError("%s: tensor byte ranges overlap or leave a gap at %d" % (path, covered))
        covered = end
    if covered != len(data):
        raise ValueError("%s: %d data bytes, tensors cover %d" % (path, len(data), covered))
    return tensors, meta


if __name__ == "__main__":
    tensors, meta = load(sys.argv[1])
    print("metadata:", {k: (v if len(v) < 60 else v[:57] + "...") for k, v in meta.items()})
    for name, t in tensors.items():
        print("%-32s %-8s %-16s l2 %.6g" % (name, t.dtype, list(t.shape), float(np.linalg.norm(t.astype(np.float64)))))
