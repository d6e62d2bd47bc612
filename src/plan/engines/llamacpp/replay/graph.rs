//! ggml's graph as the allocator sees it, and the allocator (`ggml-alloc.c`): tensors of a
//! kind (fresh, in place, a view, an input, a weight) in graph order, each freed after its last
//! consumer, placed best fit over the free blocks with the last block growing the buffer.

pub(super) use crate::model::layers::FfnClass;

pub(super) fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Past 256 TiB a tensor fits no device: shapes with one are not replayed (the stage formulas,
/// which saturate, answer then), so the offsets here stay far from overflow.
pub(super) const MOST: u64 = 1 << 48;

/// Offsets stay far from overflow: an unbounded chunk is this large.
pub(super) const UNBOUNDED: u64 = u64::MAX / 2;

/// Tensors kept allocated until a node has run, by that node.
pub(super) type Deps = std::collections::HashMap<usize, Vec<usize>>;

/// How a backend's buffer type places tensors (`get_alignment`, `get_alloc_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BufferRules {
    /// Every tensor's offset and size rounded to this.
    pub(crate) alignment: u64,
    /// CUDA's flash attention: the output's allocation also holds f16 copies of a K and a V
    /// cache of another type (`ggml_cuda_flash_attn_ext_get_alloc_size`).
    pub(crate) fa_f16_copies: bool,
    /// The largest buffer the backend allocates (`get_max_size`): the graph allocator fills
    /// chunks of at most this many bytes.
    pub(crate) max_chunk: u64,
    /// ggml-cuda pads each quantized tensor's rows to a multiple of 512 elements
    /// ([`crate::model::layers::cuda_row_padding`]): a weight's copy for an offloaded op.
    pub(crate) quantized_rows: bool,
    /// What the backend's fused kernels keep allocated (`add_alloc_dep` in its
    /// `graph_optimize`).
    pub(crate) fusion_deps: FusionDeps,
    /// Which flash-attention nodes the device runs (`supports_op`); the others fall back to
    /// the CPU.
    pub(crate) fa_kernels: FaKernels,
    /// ggml-metal's scratch beside an op's output ([`Tensor::metal_extra`]).
    pub(crate) metal_scratch: bool,
    /// The device offloads only matrix products on host weights (ggml-metal's `offload_op`),
    /// not every op of enough rows (ggml-cuda's, ggml-vulkan's).
    pub(crate) offloads_products_only: bool,
    /// How the backend reorders each split it runs before the split is allocated.
    pub(crate) reorder: Reorder,
    /// The most bytes a tensor an op reads or writes may span for the device to run the op
    /// (ggml-vulkan's storage range): larger ops, and the weights they read, stay on the CPU.
    pub(crate) tensor_limit: Option<u64>,
}

/// A backend's reordering of the splits it runs (its `graph_optimize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reorder {
    /// None: llama.cpp's graph order (the CPU, ggml-cuda).
    None,
    /// ggml-vulkan's ([`super::reorder`]).
    Vulkan,
    /// ggml-metal's ([`super::metal_reorder`]).
    Metal,
}

/// Which tensors a backend's fused kernels keep allocated beyond their last reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FusionDeps {
    /// None (the CPU, ggml-vulkan: its own reordering keeps its patterns' inputs).
    None,
    /// ggml-cuda's fused MoE kernels: a token's experts' outputs and router weights until the
    /// weighted sum's last add, so the weighting no longer runs in the experts' memory; a
    /// fused top-k router's nodes and inputs until the node after it.
    Cuda,
    /// ggml-metal's fusion patterns: what a run reads from outside it, until its last node
    /// ([`super::metal_fusion`]).
    Metal,
}

/// Which flash-attention nodes a device has kernels for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaKernels {
    /// Every one the graph has (the CPU, ggml-vulkan).
    Any,
    /// ggml-cuda's head sizes ([`FaHeads::cuda_has_kernel`]).
    Cuda,
    /// ggml-metal's head sizes ([`FaHeads::metal_has_kernel`]).
    Metal,
}

impl BufferRules {
    /// The CPU backend (`TENSOR_ALIGNMENT`), and an `rpc-server` on one.
    pub(crate) const CPU: BufferRules = BufferRules {
        alignment: 32,
        fa_f16_copies: false,
        max_chunk: UNBOUNDED,
        quantized_rows: false,
        fusion_deps: FusionDeps::None,
        fa_kernels: FaKernels::Any,
        metal_scratch: false,
        offloads_products_only: false,
        reorder: Reorder::None,
        tensor_limit: None,
    };
    /// ggml-cuda's device buffers (ROCm's too: the same source built for HIP): 128-byte
    /// alignment, flash attention's f16 copies (its tile and MMA kernels, which the prompt
    /// graph's batch takes, read K and V in f16), and its fused sum of the experts' outputs
    /// keeping them to its end.
    pub(crate) const CUDA: BufferRules = BufferRules {
        alignment: 128,
        fa_f16_copies: true,
        max_chunk: UNBOUNDED,
        quantized_rows: true,
        fusion_deps: FusionDeps::Cuda,
        fa_kernels: FaKernels::Cuda,
        metal_scratch: false,
        offloads_products_only: false,
        reorder: Reorder::None,
        tensor_limit: None,
    };

    /// ggml-metal's buffers, read from its source (not measured: no Apple GPU here): 32-byte
    /// alignment as the CPU's, scratch beside flash attention, expert products and argsorts,
    /// flash attention for its head sizes, and operator offload of matrix products only.
    pub(crate) const METAL: BufferRules = BufferRules {
        alignment: 32,
        fa_f16_copies: false,
        max_chunk: UNBOUNDED,
        quantized_rows: false,
        fusion_deps: FusionDeps::Metal,
        fa_kernels: FaKernels::Metal,
        metal_scratch: true,
        offloads_products_only: true,
        reorder: Reorder::Metal,
        tensor_limit: None,
    };

    /// ggml-vulkan's pinned host buffers, which llama.cpp gives the CPU's compute buffer when
    /// the first device is a Vulkan one: mapped memory's alignment, the same 1 GiB chunks.
    pub(crate) fn vulkan_host(limits: &crate::device::VulkanLimits) -> BufferRules {
        BufferRules {
            alignment: limits.map_alignment.max(1),
            fa_f16_copies: false,
            max_chunk: limits.chunk(),
            quantized_rows: false,
            fusion_deps: FusionDeps::None,
            fa_kernels: FaKernels::Any,
            metal_scratch: false,
            offloads_products_only: false,
            reorder: Reorder::None,
            tensor_limit: None,
        }
    }

    /// ggml-vulkan's device buffers: the device's storage offset alignment, no conversions
    /// beside flash attention's output, buffers of at most its suballocation block.
    pub(crate) fn vulkan(limits: &crate::device::VulkanLimits) -> BufferRules {
        BufferRules {
            alignment: limits.offset_alignment.max(1),
            fa_f16_copies: false,
            max_chunk: limits.chunk(),
            quantized_rows: false,
            fusion_deps: FusionDeps::None,
            fa_kernels: FaKernels::Any,
            metal_scratch: false,
            offloads_products_only: false,
            reorder: Reorder::Vulkan,
            tensor_limit: Some(limits.tensor_limit()),
        }
    }

    /// A device of these rules reached through ggml-rpc: the client asks the remote backend
    /// for each tensor's alignment, allocation size and the largest buffer, but runs every op
    /// there (its `supports_op` answers yes), has no `graph_optimize` (no reordering, no fused
    /// kernels' dependencies) and no `offload_op`.
    pub(crate) fn over_rpc(self) -> BufferRules {
        BufferRules {
            fusion_deps: FusionDeps::None,
            fa_kernels: FaKernels::Any,
            reorder: Reorder::None,
            tensor_limit: None,
            ..self
        }
    }

    /// What the allocator reserves for `t`.
    pub(super) fn alloc_size(self, t: &Tensor) -> u64 {
        if self.metal_scratch {
            return t.bytes.saturating_add(t.metal_extra);
        }
        if self.quantized_rows && t.row_pad > 0 {
            return t.bytes.saturating_add(t.row_pad);
        }
        match t.fa_f16 {
            Some((k, v)) if self.fa_f16_copies => {
                // The copies follow the output, each at a 128-byte boundary.
                let pad = |n: u64| n.div_ceil(128) * 128;
                pad(pad(t.bytes) + k) + v
            }
            _ => t.bytes,
        }
    }
}

// Distinct layouts for the in-place check (only same-shaped tensors share memory).
pub(super) const MODEL: u64 = 1;

pub(super) const QUERY: u64 = 2;

pub(super) const KV: u64 = 3;

pub(super) const FFN: u64 = 4;

pub(super) const SCORES: u64 = 5;

pub(super) const Q3: u64 = 6;

pub(super) const K3: u64 = 7;

pub(super) const OTHER: u64 = 8;

pub(super) const ROUTER: u64 = 9;

pub(super) const ROUTER_IDS: u64 = 10;

pub(super) const WEIGHTS: u64 = 11;

pub(super) const SUMS: u64 = 12;

pub(super) const EXPERT_FFN: u64 = 13;

pub(super) const EXPERT_OUT: u64 = 14;

pub(super) const LATENT: u64 = 15;

pub(super) const INNER: u64 = 16;

pub(super) const INPUT_LAYOUT: u64 = u64::MAX;

/// What the allocator needs to know of an op: whether ggml may compute it in its first
/// parent's memory (`ggml_op_can_inplace`), or whether it is only a view of another tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A leaf: an input the allocator places (tokens, positions, masks), or memory it does not
    /// own (weights, the KV cache).
    Leaf,
    /// An op that may reuse a parent's memory (add, mul, rms_norm, rope, soft_max, …).
    InPlace,
    /// An op that always gets memory of its own (mul_mat, get_rows, flash attention, …).
    Fresh,
    /// A view, reshape, permute or set_rows result: memory of `view_src`.
    View,
}

/// The ggml op a node is, as far as a backend's reordering of the graph tells ops apart
/// (`ggml_vk_graph_optimize`): the rest are `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// A leaf: an input, a weight, the KV cache.
    None,
    /// `ggml_view_*`.
    View,
    /// `ggml_reshape_*`, `ggml_permute`, `ggml_transpose`: no op of their own either.
    Reshape,
    RmsNorm,
    /// `ggml_norm`: a layer norm's normalization.
    Norm,
    /// A gated activation (`ggml_swiglu_split`, `ggml_geglu_split`).
    Glu,
    /// `ggml_cont`: a copy made contiguous.
    Cont,
    Mul,
    Add,
    AddId,
    MulMat,
    MulMatId,
    Rope,
    SetRows,
    Cpy,
    GetRows,
    /// An element-wise activation (`ggml_unary`: SiLU, GELU, ReLU, sigmoid, softplus…).
    Unary,
    SoftMax,
    ArgSort,
    SumRows,
    Clamp,
    Div,
    Scale,
    SsmConv,
    Other,
}

impl Op {
    /// No op of its own (`is_empty` in ggml-vulkan's reordering).
    pub(super) fn is_empty(self) -> bool {
        matches!(self, Op::None | Op::View | Op::Reshape)
    }
}

#[derive(Debug, Clone)]
pub(super) struct Tensor {
    /// The ggml op (`None` for leaves).
    pub(super) op: Op,
    pub(super) kind: Kind,
    pub(super) bytes: u64,
    /// Shape tag: tensors may share memory in place only when their layouts agree.
    pub(super) layout: u64,
    pub(super) srcs: Vec<usize>,
    pub(super) view_src: Option<usize>,
    pub(super) input: bool,
    pub(super) output: bool,
    /// Weights and the KV cache: allocated elsewhere.
    pub(super) external: bool,
    /// The part of the model being built when the tensor was made: where its weights live.
    pub(super) part: Part,
    /// An op that writes into a view (`set_rows`, `cpy`): placed as a view, scheduled as an op.
    pub(super) writes: bool,
    /// A routed expert's weight (`ffn_*_exps`): what `--n-cpu-moe` keeps on the CPU.
    pub(super) experts: bool,
    /// A feed-forward weight's class: what the fit's overrides move by name.
    pub(super) ffn: Option<FfnClass>,
    /// Flash attention over a cache that is not f16: the bytes of K and V in f16, which CUDA
    /// converts them to beside the output.
    pub(super) fa_f16: Option<(u64, u64)>,
    /// A flash-attention node's head sizes: whether ggml-cuda has a kernel for it.
    pub(super) fa_heads: Option<FaHeads>,
    /// A quantized weight's bytes that ggml-cuda adds to round its rows up
    /// ([`crate::model::layers::cuda_row_padding`]); a copy of the weight keeps them.
    pub(super) row_pad: u64,
    /// A weight: its name and size (`bytes` is set from them when the graph is placed).
    pub(super) weight: Option<Weight>,
    /// The rows (tokens) an op computes: what ggml's operator offload weighs (`offload_op`).
    pub(super) rows: u64,
    /// Scratch ggml-metal allocates with the op's output (`get_alloc_size`:
    /// [`super::metal`]): flash attention's, an expert product's, an argsort's second copy.
    pub(super) metal_extra: u64,
}

/// What decides whether ggml-cuda runs a flash-attention node (`ggml_cuda_get_best_fattn_kernel`):
/// the K and V head sizes, the query heads to a K head, and the cache cells it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FaHeads {
    pub(super) k: u64,
    pub(super) v: u64,
    pub(super) gqa: u64,
    pub(super) cells: u64,
}

impl FaHeads {
    /// Attention over `cells` cache cells with `arch`'s head size for K and V, its query heads
    /// grouped over its K heads.
    pub(super) fn grouped(arch: &crate::model::ModelArch, cells: u64) -> Self {
        FaHeads {
            k: arch.head_dim,
            v: arch.head_dim,
            gqa: arch.num_heads / arch.num_kv_heads.max(1),
            cells,
        }
    }

    /// ggml-cuda has a kernel: its head sizes, the larger ones only where several query heads
    /// share a K head over a cache padded to its 256-cell stride (cache types and a mask over
    /// one sequence as llama.cpp's prompt graph has them).
    pub(super) fn cuda_has_kernel(&self) -> bool {
        let shared = self.gqa >= 2 && self.cells % 256 == 0;
        match self.k {
            40 | 64 | 72 | 80 | 96 | 112 | 128 | 256 => self.v == self.k,
            192 => self.v == 128 && shared && self.gqa % 8 == 0,
            320 => self.v == 256 && shared && self.gqa % 32 == 0,
            512 | 576 => self.v == 512 && shared,
            _ => false,
        }
    }

    /// ggml-metal has a kernel (`supports_op`): its head sizes, V's no wider than K's (and
    /// equal at 72).
    pub(super) fn metal_has_kernel(&self) -> bool {
        let sized = matches!(
            self.k,
            32 | 40 | 48 | 64 | 72 | 80 | 96 | 112 | 128 | 192 | 256 | 320 | 512 | 576
        );
        sized && self.v <= self.k && (self.k != 72 || self.v == 72)
    }

    /// Whether a device with `kernels` runs this flash-attention node.
    pub(super) fn runs_on(&self, kernels: FaKernels) -> bool {
        match kernels {
            FaKernels::Any => true,
            FaKernels::Cuda => self.cuda_has_kernel(),
            FaKernels::Metal => self.metal_has_kernel(),
        }
    }
}

/// A weight as llama.cpp names it and what it holds: what a copy of it to another backend
/// takes when ggml's scheduler runs an op on it there (operator offload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Weight {
    /// llama.cpp's tensor name (`LLM_TENSOR_NAMES`); in a layer, the part after `blk.N.`.
    pub(super) name: &'static str,
    pub(super) elements: u64,
    /// Stored at the file's matrix type; otherwise a norm or a bias, which GGUFs keep in f32.
    pub(super) matrix: bool,
    /// An embedding table, read by `get_rows`, which ggml never offloads.
    pub(super) lookup: bool,
}

/// A part of the model, as llama.cpp places its weights: the input layer, a repeating layer,
/// or the output layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Part {
    #[default]
    Input,
    Layer(u64),
    Output,
}

/// A computation graph in llama.cpp's evaluation order.
#[derive(Debug, Default)]
pub(super) struct Graph {
    pub(super) tensors: Vec<Tensor>,
    pub(super) nodes: Vec<usize>,
    pub(super) leafs: Vec<usize>,
    pub(super) seen: Vec<bool>,
    /// The part being built now.
    pub(super) part: Part,
    /// The rows the ops made now compute: the batch's tokens, the output rows once gathered.
    pub(super) rows: u64,
}

impl Graph {
    pub(super) fn push(&mut self, mut t: Tensor) -> usize {
        t.part = self.part;
        t.rows = self.rows;
        self.tensors.push(t);
        self.seen.push(false);
        self.tensors.len() - 1
    }

    /// Memory the allocator does not place (a weight or the KV cache).
    pub(super) fn external(&mut self) -> usize {
        self.push(Tensor {
            op: Op::None,
            kind: Kind::Leaf,
            bytes: 0,
            layout: 0,
            srcs: Vec::new(),
            view_src: None,
            input: false,
            output: false,
            external: true,
            part: Part::Input,
            writes: false,
            experts: false,
            ffn: None,
            fa_f16: None,
            row_pad: 0,
            metal_extra: 0,
            fa_heads: None,
            weight: None,
            rows: 0,
        })
    }

    /// A weight matrix of `rows` × `cols` named `name`.
    pub(super) fn matrix(&mut self, name: &'static str, rows: u64, cols: u64) -> usize {
        self.named(name, rows.saturating_mul(cols), true)
    }

    /// A norm's or a bias's `n` values named `name`.
    pub(super) fn vector(&mut self, name: &'static str, n: u64) -> usize {
        self.named(name, n, false)
    }

    /// An embedding table of `rows` × `cols` (read by `get_rows`).
    pub(super) fn table(&mut self, name: &'static str, rows: u64, cols: u64) -> usize {
        let i = self.matrix(name, rows, cols);
        if let Some(w) = self.tensors[i].weight.as_mut() {
            w.lookup = true;
        }
        i
    }

    fn named(&mut self, name: &'static str, elements: u64, matrix: bool) -> usize {
        let i = self.external();
        self.tensors[i].weight = Some(Weight {
            name,
            elements,
            matrix,
            lookup: false,
        });
        i
    }

    /// A routed expert's weight (`ffn_*_exps`, and its bias) of `class`.
    pub(super) fn expert_weight(&mut self, class: FfnClass, w: (&'static str, u64, bool)) -> usize {
        let i = self.ffn_weight(class, w);
        self.tensors[i].experts = true;
        i
    }

    /// A feed-forward weight (`ffn_gate*`, `ffn_up*`, `ffn_down*`) of `class`: its name, its
    /// elements, and whether it is a matrix.
    pub(super) fn ffn_weight(&mut self, class: FfnClass, w: (&'static str, u64, bool)) -> usize {
        let i = self.named(w.0, w.1, w.2);
        self.tensors[i].ffn = Some(class);
        i
    }

    pub(super) fn input(&mut self, bytes: u64) -> usize {
        self.push(Tensor {
            op: Op::None,
            kind: Kind::Leaf,
            bytes,
            // Inputs never share memory in place with the ops' outputs.
            layout: INPUT_LAYOUT,
            srcs: Vec::new(),
            view_src: None,
            input: true,
            output: false,
            external: false,
            part: Part::Input,
            writes: false,
            experts: false,
            ffn: None,
            fa_f16: None,
            row_pad: 0,
            metal_extra: 0,
            fa_heads: None,
            weight: None,
            rows: 0,
        })
    }

    pub(super) fn op(&mut self, kind: Kind, bytes: u64, layout: u64, srcs: &[usize]) -> usize {
        let op = self.op_of(kind, srcs);
        self.push(Tensor {
            op,
            kind,
            bytes,
            layout,
            srcs: srcs.to_vec(),
            view_src: None,
            input: false,
            output: false,
            external: false,
            part: Part::Input,
            writes: false,
            experts: false,
            ffn: None,
            fa_f16: None,
            row_pad: 0,
            metal_extra: 0,
            fa_heads: None,
            weight: None,
            rows: 0,
        })
    }

    /// A view of `src` (of its own source when `src` is itself a view, as ggml records it).
    pub(super) fn view(&mut self, src: usize, layout: u64) -> usize {
        let root = self.tensors[src].view_src.unwrap_or(src);
        let bytes = self.tensors[src].bytes;
        self.push(Tensor {
            op: Op::View,
            kind: Kind::View,
            bytes,
            layout,
            srcs: vec![src],
            view_src: Some(root),
            input: false,
            output: false,
            external: self.tensors[root].external,
            part: Part::Input,
            writes: false,
            experts: false,
            ffn: None,
            fa_f16: None,
            row_pad: 0,
            metal_extra: 0,
            fa_heads: None,
            weight: None,
            rows: 0,
        })
    }

    /// A view of `src` spanning `bytes` of it (`ggml_nbytes`: what a copy to another backend
    /// holds), for a view smaller than what it views: a slice, or a strided view that stops
    /// short of its last row.
    pub(super) fn view_spanning(&mut self, src: usize, layout: u64, bytes: u64) -> usize {
        let v = self.view(src, layout);
        self.tensors[v].bytes = bytes;
        v
    }

    /// `ggml_set_rows(dest, rows, indices)`: a view of `dest` whose sources are, as ggml orders
    /// them, the rows, the indices and `dest`.
    pub(super) fn set_rows(&mut self, dest: usize, rows: usize, indices: usize) -> usize {
        self.write(dest, &[rows, indices, dest])
    }

    /// `ggml_cpy(src, dest)`: a view of `dest` that reads `src`.
    pub(super) fn copy(&mut self, src: usize, dest: usize) -> usize {
        let t = self.write(dest, &[src, dest]);
        self.tag(t, Op::Cpy)
    }

    /// `ggml_cast` of `x` to another type, `bytes` once cast (flash attention's f16 K, V and
    /// mask): a fresh copy.
    pub(super) fn cast(&mut self, x: usize, bytes: u64) -> usize {
        let t = self.op(Kind::Fresh, bytes, OTHER, &[x]);
        self.tag(t, Op::Cpy)
    }

    /// Names the ggml op `t` is, where [`Graph::op`] cannot tell it from its sources.
    pub(super) fn tag(&mut self, t: usize, op: Op) -> usize {
        self.tensors[t].op = op;
        t
    }

    /// The op a node of `kind` over `srcs` is, told from the weights it reads: a product with
    /// a matrix (one expert of several: `mul_mat_id`), a row lookup in a table, a norm's
    /// weight multiplied or a bias added. The rest are tagged where they are made.
    fn op_of(&self, kind: Kind, srcs: &[usize]) -> Op {
        let weight = |i: usize| {
            let t = &self.tensors[i];
            t.weight.filter(|_| t.external && t.view_src.is_none())
        };
        match (
            srcs.first().and_then(|&s| weight(s)),
            srcs.get(1).and_then(|&s| weight(s)),
        ) {
            (Some(w), _) if w.lookup => Op::GetRows,
            (Some(w), _) if w.matrix && kind == Kind::Fresh => {
                if srcs.len() == 3 {
                    Op::MulMatId
                } else {
                    Op::MulMat
                }
            }
            (None, Some(b)) if !b.matrix && srcs.len() == 3 => Op::AddId,
            (None, Some(b)) if !b.matrix && b.name.ends_with(".bias") => Op::Add,
            (None, Some(w)) if !w.matrix => Op::Mul,
            _ => Op::Other,
        }
    }

    /// An op that writes into `dest` (a view of it) from `srcs`.
    pub(super) fn write(&mut self, dest: usize, srcs: &[usize]) -> usize {
        let root = self.tensors[dest].view_src.unwrap_or(dest);
        self.push(Tensor {
            op: Op::SetRows,
            kind: Kind::View,
            bytes: self.tensors[dest].bytes,
            layout: 0,
            srcs: srcs.to_vec(),
            view_src: Some(root),
            input: false,
            output: false,
            external: self.tensors[root].external,
            part: Part::Input,
            writes: true,
            experts: false,
            ffn: None,
            fa_f16: None,
            row_pad: 0,
            metal_extra: 0,
            fa_heads: None,
            weight: None,
            rows: 0,
        })
    }

    /// `ggml_build_forward_expand`: appends `t` and its unvisited ancestors, parents first.
    pub(super) fn expand(&mut self, t: usize) {
        // Iterative depth-first post-order (a deep model's chain of layers would otherwise
        // recurse once per tensor).
        let mut stack = vec![(t, 0usize)];
        while let Some((i, next)) = stack.pop() {
            if next == 0 {
                if self.seen[i] {
                    continue;
                }
                self.seen[i] = true;
            }
            if let Some(&src) = self.tensors[i].srcs.get(next) {
                stack.push((i, next + 1));
                if !self.seen[src] {
                    stack.push((src, 0));
                }
                continue;
            }
            if self.tensors[i].kind == Kind::Leaf {
                self.leafs.push(i);
            } else {
                self.nodes.push(i);
            }
        }
    }
}
