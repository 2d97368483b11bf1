#!/usr/bin/env bash
# Remakes the seed corpora in fuzz/corpus/ from the golden frames in tests/data/wire-vectors:
# frame_header and manifest get every frame (valid and invalid), handshake the HELLO frames,
# connection the golden HELLO (node-a) followed by each golden frame.
set -euo pipefail
cd "$(dirname "$0")/.."
vectors=tests/data/wire-vectors
rm -rf fuzz/corpus
mkdir -p fuzz/corpus/{frame_header,manifest,handshake,connection}
for f in "$vectors"/*.bin "$vectors"/invalid/*.bin; do
  name=$(basename "$f")
  [ "$(dirname "$f")" = "$vectors/invalid" ] && name="invalid_$name"
  cp "$f" fuzz/corpus/frame_header/"$name"
  cp "$f" fuzz/corpus/manifest/"$name"
  cat "$vectors"/hello.bin "$f" >fuzz/corpus/connection/"$name"
done
cp "$vectors"/hello.bin "$vectors"/hello_ack.bin fuzz/corpus/handshake/
