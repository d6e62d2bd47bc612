#!/bin/sh
# Records every row of rows.txt into tests/fixtures/pytorch/ (PYTHON: a venv's python with
# torch 2.15.0 and transformers 5.24.0). Rows already recorded are kept.
set -eu
here=$(dirname "$0")
out="$here/../../tests/fixtures/pytorch"
PYTHON=${PYTHON:-python3}
# record NAME CONFIG_MODEL RECIPE OPTIMIZER BATCH SEQ [FLAGS...]: one measure_train.py record.
record() {
    name=$1 model=$2 recipe=$3 opt=$4 batch=$5 seq=$6
    shift 6
    [ -s "$out/$name.json" ] && return 0
    "$PYTHON" "$here/measure_train.py" --config "$out/configs/$model.json" --recipe "$recipe" \
        --optimizer "$opt" --batch "$batch" --seq "$seq" "$@" > "$out/$name.json.tmp"
    mv "$out/$name.json.tmp" "$out/$name.json"
    echo "$name"
}

grep -v '^#' "$here/rows.txt" | while read -r model recipe opt batch seq ckpt attn; do
    flag=""
    suffix=""
    [ "${ckpt:-}" = "-" ] && ckpt=""
    case "$recipe" in
    lora:* | qlora:*)
        # lora:RANK:TARGETS, qlora:RANK:TARGETS
        rank=$(echo "$recipe" | cut -d: -f2)
        targets=$(echo "$recipe" | cut -d: -f3)
        recipe=${recipe%%:*}
        flag="--lora-rank $rank --lora-targets $targets"
        suffix="-r$rank-$targets"
        ;;
    esac
    name="train-$model-$recipe$suffix-$opt-b$batch-s$seq${ckpt:+-ckpt}${attn:+-$attn}"
    [ -n "${ckpt:-}" ] && flag="$flag --checkpointing"
    [ -n "${attn:-}" ] && flag="$flag --attn $attn"
    # shellcheck disable=SC2086 # the flags are words
    record "$name" "$model" "$recipe" "$opt" "$batch" "$seq" $flag
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
    case "${opts:-}" in *mixed*) flag="$flag --mixed" ;; esac
    case "${opts:-}" in *lora*) flag="$flag --lora-rank 16" ;; esac
    case "${opts:-}" in *qlora*) flag="$flag --qlora" ;; esac
    ga=$(echo "${opts:-}" | sed -n 's/.*ga\([0-9][0-9]*\).*/\1/p')
    [ -n "$ga" ] && flag="$flag --grad-accum $ga"
    case "${opts:-}" in *autocast*) flag="$flag --autocast" ;; esac
    name="fsdp-$model-w$world-s$seq${opts:+-$opts}"
    [ -s "$out/$name.json" ] && continue
    "$PYTHON" "$here/measure_fsdp.py" --config "$out/configs/$model.json" --world "$world" \
        --seq "$seq" $flag > "$out/$name.json.tmp"
    mv "$out/$name.json.tmp" "$out/$name.json"
    echo "$name"
done

grep -v '^#' "$here/ga_rows.txt" | while read -r name model args; do
    [ -s "$out/$name.json" ] && continue
    # shellcheck disable=SC2086 # the arguments are words
    "$PYTHON" "$here/measure_train.py" --config "$out/configs/$model.json" $args \
        > "$out/$name.json.tmp"
    mv "$out/$name.json.tmp" "$out/$name.json"
    echo "$name"
done

grep -v '^#' "$here/ddp_rows.txt" | while read -r model recipe opt batch seq buckets ckpt; do
    flag="--ddp"
    [ "$buckets" = view ] && flag="$flag --bucket-view"
    name="train-ddp-$buckets-$model-$recipe-$opt-b$batch-s$seq${ckpt:+-ckpt}"
    [ -n "${ckpt:-}" ] && flag="$flag --checkpointing"
    # shellcheck disable=SC2086 # the flags are words
    record "$name" "$model" "$recipe" "$opt" "$batch" "$seq" $flag
done

grep -v '^#' "$here/zero1_rows.txt" | while read -r model recipe opt batch seq world; do
    record "train-zero1-w$world-$model-$recipe-$opt-b$batch-s$seq" "$model" "$recipe" "$opt" \
        "$batch" "$seq" --ddp --zero1 "$world"
done
