#!/usr/bin/env bash
# Files that cannot be read, end to end: every reader of a file a user names (text, IDX and
# CIFAR-10 datasets, configs, hostfiles, checkpoints, a --hf_config folder) turns a failed read
# into a typed error that names the file and the errno, and every message shows the control
# characters it quotes as escapes. Reads fail for real: /proc/self/mem fails from byte 0 with
# EIO, and the fail_reads shim (tests/support/fail_reads.cpp, LD_PRELOAD) fails the reads of
# one file from a chosen byte on, as a bad sector does.
# Usage: read_errors_test.sh ZEROTRAIN_BINARY FAIL_READS_SHIM MAKE_SYNTHETIC_CHECKPOINT REPO_ROOT
set -uo pipefail
zt=$1
shim=$2
make_checkpoint=$3
root=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/cli/expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
export OMP_NUM_THREADS=1
config="$root/examples/ds_config_train_zero2.json"
eio="Input/output error (EIO)"

# failing PATH FROM CMD...: runs CMD with the reads of PATH failing from byte FROM on.
failing() {
  local path=$1 from=$2
  shift 2
  LD_PRELOAD="$shim" ZEROTRAIN_TEST_EIO_PATH="$path" ZEROTRAIN_TEST_EIO_FROM="$from" "$@"
}

# no_raw_controls NAME CMD...: the output holds no NUL and no ESC byte.
no_raw_controls() {
  local name=$1
  shift
  "$@" >"$tmp/raw.out" 2>&1
  if [ "$(tr -d '\000\033' <"$tmp/raw.out" | wc -c)" -eq "$(wc -c <"$tmp/raw.out")" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $name: the output holds a raw NUL or ESC byte"
    od -c "$tmp/raw.out" | head -20
  fi
}

# ---- Text datasets
python3 -c "print('In the beginning was the word. ' * 4000)" >"$tmp/book.txt"
train_text=("$zt" train --model gpt --deepspeed "$config" --max_steps 1 --model_config block_size=16)
expect text_proc_mem 7 "[io] /proc/self/mem: cannot be read at byte 0: $eio" -- \
  "${train_text[@]}" --dataset text:/proc/self/mem
expect text_eio_first_byte 7 "[io] $tmp/book.txt: cannot be read at byte 0: $eio" -- \
  failing "$tmp/book.txt" 0 "${train_text[@]}" --dataset "text:$tmp/book.txt"
expect text_eio_mid_file 7 "[io] $tmp/book.txt: cannot be read at byte 65536: $eio" -- \
  failing "$tmp/book.txt" 65536 "${train_text[@]}" --dataset "text:$tmp/book.txt"
mkdir "$tmp/folder.txt"
expect text_directory 7 "[io] $tmp/folder.txt: is a directory; give the path of a plain text file" -- \
  "${train_text[@]}" --dataset "text:$tmp/folder.txt"

# ---- IDX (MNIST-named, gzip) and CIFAR-10
python3 - "$tmp/mnist" "$tmp/cifar" <<'PY'
import gzip, os, struct, sys
mnist, cifar = sys.argv[1], sys.argv[2]
os.makedirs(mnist); os.makedirs(cifar)
for split, n in (("train", 64), ("t10k", 16)):
    with gzip.open(f"{mnist}/{split}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + os.urandom(n * 28 * 28))
    with gzip.open(f"{mnist}/{split}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
record = lambda i: bytes([i % 10]) + os.urandom(3072)
for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
    with open(f"{cifar}/{name}", "wb") as f:
        f.write(b"".join(record(i) for i in range(8)))
PY
train_images=("$zt" train --model convnet --deepspeed "$config" --max_steps 1)
expect mnist_gz_eio 7 "[io] $tmp/mnist/train-images-idx3-ubyte.gz: cannot be read at byte" "$eio" -- \
  failing "$tmp/mnist/train-images-idx3-ubyte.gz" 10 "${train_images[@]}" --dataset "mnist:$tmp/mnist"
expect cifar_eio 7 "[io] $tmp/cifar/data_batch_3.bin: cannot be read at byte 4096: $eio" -- \
  failing "$tmp/cifar/data_batch_3.bin" 4096 "${train_images[@]}" --dataset "cifar10:$tmp/cifar"

# ---- Configs and hostfiles: the readers that pick their own error type
cp "$config" "$tmp/ds.json"
expect config_eio 3 "$tmp/ds.json: cannot read the config file: cannot be read at byte 0: $eio" -- \
  failing "$tmp/ds.json" 0 "$zt" config check "$tmp/ds.json"
printf 'localhost slots=1\n' >"$tmp/hostfile"
expect hostfile_eio 2 "cannot read the hostfile $tmp/hostfile: cannot be read at byte 0: $eio" -- \
  failing "$tmp/hostfile" 0 "$zt" launch --hostfile "$tmp/hostfile" -- true

# ---- Checkpoints: a rank file whose data cannot be read, header read fine
"$make_checkpoint" "$tmp/ckpt" 1 2 4096 >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; echo "FAIL: make_checkpoint"; exit 1; }
rank_file=$(find "$tmp/ckpt" -name 'rank_00000.safetensors' | head -1)
expect checkpoint_eio 8 "$rank_file: cannot be read at byte" "$eio" -- \
  failing "$rank_file" 4096 "$zt" zero-to-fp32 "$tmp/ckpt" "$tmp/out"
mkdir "$tmp/hf" && echo '{"model_type": "gpt2"}' >"$tmp/hf/config.json"
expect hf_config_eio 7 "[io] $tmp/hf/config.json: cannot be read at byte 0: $eio" -- \
  failing "$tmp/hf/config.json" 0 "$zt" zero-to-fp32 "$tmp/ckpt" "$tmp/out_hf" --hf_config "$tmp/hf"

# ---- Messages escape what they quote: a path, a flag, a key and a line read from files
esc=$'\x1b'
expect escaped_dataset_path 7 "[io] $tmp/a\\x1b[31mb: no such file" -- \
  "${train_text[@]}" --dataset "text:$tmp/a${esc}[31mb"
no_raw_controls escaped_dataset_path_raw "${train_text[@]}" --dataset "text:$tmp/a${esc}[31mb"
expect escaped_flag 2 "--bo\\x1bgus" -- "$zt" config check "--bo${esc}gus" "$tmp/ds.json"
no_raw_controls escaped_flag_raw "$zt" config check "--bo${esc}gus" "$tmp/ds.json"
# NUL cannot come from argv, only from a file: a key with \u0000 and \u001b in a config.
printf '{"train_batch_size": 8, "a\\u0000b\\u001b[2Jc": 1}' >"$tmp/nul_key.json"
expect nul_key_check 3 'a\x00b\x1b[2Jc: unknown key' -- "$zt" config check "$tmp/nul_key.json"
no_raw_controls nul_key_check_raw "$zt" config check "$tmp/nul_key.json"
expect nul_key_train 3 'a\x00b\x1b[2Jc: unknown key' -- \
  "$zt" train --model mlp --deepspeed "$tmp/nul_key.json" --max_steps 1
no_raw_controls nul_key_train_raw "$zt" train --model mlp --deepspeed "$tmp/nul_key.json" --max_steps 1
expect invalid_utf8_path 3 "$tmp/\\xff.json: cannot read the config file: no such file" -- \
  "$zt" config check "$tmp/"$'\xff'".json"
expect invalid_utf8_path_json 3 '"ok": false' "no such file" -- "$zt" config check "$tmp/"$'\xff'".json" --json
printf 'wor\000ker\033[31m slots:2\n' >"$tmp/hostfile.nul"
expect nul_hostfile_line 2 "hostfile.nul:1: bad hostfile entry 'wor\\x00ker\\x1b[31m slots:2'" -- \
  "$zt" launch --hostfile "$tmp/hostfile.nul" -- true
no_raw_controls nul_hostfile_line_raw "$zt" launch --hostfile "$tmp/hostfile.nul" -- true

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
