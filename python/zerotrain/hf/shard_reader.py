"""The weights of a Hugging Face model directory (model.safetensors, or the files that
model.safetensors.index.json lists), read by flat element ranges: a rank asks for the
elements [begin, end) of a tensor, the ones its ZeRO-3 chunk holds, and exactly those bytes
are read, with pread straight into the chunk, so that neither a whole file nor a whole
tensor ever passes through the process.

The safetensors package is not used for the reads: its pread backend reads a whole tensor to
serve a slice of it, and its memory map leaves every page it touched resident while the
file is open (measured with 0.8: reading a quarter of each tensor read, or mapped, the whole
file). The format is simple enough to read directly: an 8-byte little-endian header size, a
JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}}, then the row-major
tensors, whose offsets count from the end of the header."""

import json
import math
import os
import struct
import sys

import torch

from ..errors import IoError, NotSupportedError

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Formats transformers also reads, whose tensors cannot be read in part (pickles).
_PICKLED = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")
# A header larger than this is not a safetensors header (the format's own limit is 100 MB).
_MAX_HEADER_BYTES = 100 * 2**20
# One pread at most this large: the kernel returns at most about 2 GiB per call anyway.
_MAX_READ_BYTES = 256 * 2**20


def _dtypes():
    names = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
             "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool", "U16": "uint16",
             "U32": "uint32", "U64": "uint64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
    return {code: getattr(torch, name) for code, name in names.items() if hasattr(torch, name)}


_DTYPES = _dtypes()


def with_variant(name, variant):
    """transformers' naming of a variant: model.safetensors -> model.fp16.safetensors,
    model.safetensors.index.json -> model.safetensors.index.fp16.json."""
    if not variant:
        return name
    parts = name.split(".")
    return ".".join(parts[:-1] + [variant] + parts[-1:])


class _File:
    """One open safetensors file: its header, and reads of byte ranges of its tensors."""

    def __init__(self, path):
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            raise IoError(f"[io] {path}: cannot open it ({e.strerror})") from None
        try:
            raw = os.pread(self.fd, 8, 0)
            (size,) = struct.unpack("<Q", raw) if len(raw) == 8 else (None,)
            if size is None or size > _MAX_HEADER_BYTES:
                raise ValueError("no safetensors header size")
            header = json.loads(os.pread(self.fd, size, 8))
            layout = (header.get("__metadata__") or {}).get("format", "pt")
            if layout != "pt":
                # transformers converts these (other frameworks' layouts) whole.
                raise NotSupportedError(f"[unsupported] {path} holds {layout} weights; ZeRO-3 loading reads PyTorch "
                                        "safetensors only: load it once without HfZeroConfig and save_pretrained it")
            self.data_start = 8 + size
            self.tensors = {}
            for name, entry in header.items():
                if name == "__metadata__":
                    continue
                dtype = _DTYPES.get(entry["dtype"])
                if dtype is None:
                    raise NotSupportedError(f"[unsupported] {path}: {name} is stored as {entry['dtype']}, which "
                                            "this torch has no dtype for")
                shape = tuple(int(d) for d in entry["shape"])
                begin, end = (int(o) for o in entry["data_offsets"])
                if end - begin != math.prod(shape) * dtype.itemsize:
                    raise ValueError(f"{name}: {end - begin} bytes for shape {list(shape)} in {entry['dtype']}")
                self.tensors[name] = (dtype, shape, begin)
        except NotSupportedError:
            os.close(self.fd)
            raise
        except (ValueError, KeyError, TypeError, struct.error) as e:
            os.close(self.fd)
            raise IoError(f"[io] {path}: not a readable safetensors file ({e}); write it again with "
                          "save_pretrained") from None

    def read_into(self, name, begin, end, out):
        """The flat elements [begin, end) of tensor `name` into `out` (contiguous, end - begin
        elements of the file's dtype): one byte range, as the tensor is row-major."""
        dtype, _, offset = self.tensors[name]
        view = out.view(torch.uint8).numpy()   # out's own memory, as bytes (bf16 has no numpy dtype)
        pos, at = 0, self.data_start + offset + begin * dtype.itemsize
        while pos < view.nbytes:
            n = os.preadv(self.fd, [view[pos:pos + _MAX_READ_BYTES]], at + pos)
            if n <= 0:
                raise IoError(f"[io] {self.path}: the file ends inside {name}; it is truncated, write it again")
            pos += n

    def close(self):
        os.close(self.fd)


class CheckpointFiles:
    """The tensors of a model directory's safetensors files, by name. Close it when done."""

    def __init__(self, directory, variant=None):
        self.directory = directory
        single = os.path.join(directory, with_variant(SINGLE_FILE, variant))
        index = os.path.join(directory, with_variant(INDEX_FILE, variant))
        if os.path.isfile(single):
            files = [single]
        elif os.path.isfile(index):
            files = self._files_of_index(index)
        else:
            pickled = [n for n in _PICKLED if os.path.isfile(os.path.join(directory, with_variant(n, variant)))]
            if pickled:
                raise NotSupportedError(
                    f"[unsupported] {directory} holds its weights as {pickled[0]}, which cannot be read in part; "
                    "ZeRO-3 loading reads each rank's share from safetensors files: save the model once with "
                    "save_pretrained(dir) (safetensors is its default) and load that directory")
            raise IoError(f"[io] {directory}: no {os.path.basename(single)} and no {os.path.basename(index)}; "
                          "give the directory save_pretrained wrote")
        if sys.byteorder != "little":
            raise NotSupportedError("[unsupported] safetensors files are little-endian; this machine is not")
        self._files = []
        self._file_of = {}
        try:
            for path in files:
                self._files.append(_File(path))
                for key in self._files[-1].tensors:
                    self._file_of.setdefault(key, self._files[-1])
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _files_of_index(index):
        try:
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise IoError(f"[io] {index}: not a safetensors index with a \"weight_map\" ({e})") from None
        directory = os.path.dirname(index)
        files = [os.path.join(directory, name) for name in sorted(set(weight_map.values()))]
        absent = [f for f in files if not os.path.isfile(f)]
        if absent:
            raise IoError(f"[io] {index} lists {os.path.basename(absent[0])}, which is not in {directory}; "
                          "copy the whole checkpoint directory")
        return files

    def keys(self):
        return list(self._file_of)

    def shape(self, key):
        return self._file_of[key].tensors[key][1]

    def read_range(self, key, begin, end, out):
        """Writes the flat elements [begin, end) of `key` into `out` (1-D, end - begin
        elements, any dtype: the values are converted). Straight into `out` when it is
        contiguous and of the file's dtype."""
        if end <= begin:
            return
        f = self._file_of[key]
        dtype = f.tensors[key][0]
        if out.dtype == dtype and out.is_contiguous() and out.device.type == "cpu":
            f.read_into(key, begin, end, out)
        else:
            staged = torch.empty(end - begin, dtype=dtype)
            f.read_into(key, begin, end, staged)
            out.copy_(staged)

    def read(self, key):
        """The whole tensor (buffers: small, and every rank keeps them whole)."""
        f = self._file_of[key]
        dtype, shape, _ = f.tensors[key]
        out = torch.empty(shape, dtype=dtype)
        f.read_into(key, 0, out.numel(), out.reshape(-1))
        return out

    def close(self):
        for f in self._files:
            f.close()
        self._files = []
