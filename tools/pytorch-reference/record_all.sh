#!/bin/sh
# Records every row of rows.txt into tests/fixtures/pytorch/ (PYTHON: a venv's python with
# torch 2.15.0 and transformers 5.24.0). Rows already recorded are kept.
set -eu
here=$(dirname "$0")
out="$here/../../tests/fixtures/pytorch"
PYTHON=${PYTHON:-python3}
grep -v '^#' "$here/rows.txt" | while read -r model recipe opt batch seq ckpt; do
    flag=""
    suffix=""
    case "$recipe" in
    lora:*)
        # lora:RANK:TARGETS
        rank=$(echo "$recipe" | cut -d: -f2)
        targets=$(echo "$recipe" | cut -d: -f3)
        recipe=lora
        flag="--lora-rank $rank --lora-targets $targets"
        suffix="-r$rank-$targets"
        ;;
    esac
    name="train-$model-$recipe$suffix-$opt-b$batch-s$seq${ckpt:+-ckpt}"
    [ -s "$out/$name.json" ] && continue
    [ -n "${ckpt:-}" ] && flag="$flag --checkpointing"
    "$PYTHON" "$here/measure_train.py" --config "$out/configs/$model.json" --recipe "$recipe" \
        --optimizer "$opt" --batch "$batch" --seq "$seq" $flag > "$out/$name.json.tmp"
    mv "$out/$name.json.tmp" "$out/$name.json"
    echo "$name"
done

grep -v '^#' "$here/generate_rows.txt" | while read -r model batch prompt new; do
    name="generate-$model-b$batch-p$prompt-n$new"
    [ -s "$out/$name.json" ] && continue
    "$PYTHON" "$here/measure_generate.py" --config "$out/configs/$model.json" --batch "$batch" \
        --prompt "$prompt" --new-tokens "$new" > "$out/$name.json.tmp"
    mv "$out/$name.json.tmp" "$out/$name.json"
    echo "$name"
done

grep -v '^#' "$here/fsdp_rows.txt" | while read -r model world seq opts; do
    flag=""
    case "${opts:-}" in *keep*) flag="--no-reshard-after-forward" ;; esac
    case "${opts:-}" in *ckpt*) flag="$flag --checkpointing" ;; esac
    name="fsdp-$model-w$world-s$seq${opts:+-$opts}"
    [ -s "$out/$name.json" ] && continue
    "$PYTHON" "$here/measure_fsdp.py" --config "$out/configs/$model.json" --world "$world" \
        --seq "$seq" $flag > "$out/$name.json.tmp"
    mv "$out/$name.json.tmp" "$out/$name.json"
    echo "$name"
done
