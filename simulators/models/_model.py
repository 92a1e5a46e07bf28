"""The model zoo: transformer shapes, validated at load, and their parameter counts.

A model is dense or mixture-of-experts (MoE), with standard (MHA/GQA) or multi-head latent
attention (MLA, DeepSeek-V2/V3). Counts follow the weight shapes of the reference code:
biases only where `qkv_bias` says so, one RMSNorm weight vector per norm.
"""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulators._errors import SpecError
from simulators._registry import Registry, load_catalog

MOE_FIELDS = ("moe_top_k", "moe_ffn_hidden", "moe_shared_ffn_hidden", "active_params_b")
MLA_FIELDS = ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


class ModelSpec(BaseModel):
    """A decoder-only transformer: dense or MoE MLPs, standard or latent attention.

    `ffn_hidden` is the width of each gate/up projection when `gated_mlp` is true (SwiGLU); in
    an MoE model it is the width of the leading `dense_layers` dense MLPs.

    MoE (all optional; `moe_experts` switches it on): every layer from index `dense_layers` on
    replaces its MLP by a router (hidden x moe_experts weights), `moe_experts` routed experts of
    width `moe_ffn_hidden` of which each token uses `moe_top_k`, and `moe_shared_experts`
    always-on experts of width `moe_shared_ffn_hidden` (default: `moe_ffn_hidden`).
    `moe_expert_bias`: the routed experts' projections carry biases (GPT-OSS); Megatron-Core adds
    the output projection's bias outside the grouped GEMM, expert by expert (see
    simulators.workload._step.moe_expert_bias_kernels). Their parameters (< 0.01 %) are not counted.

    MLA (optional; `kv_lora_rank` switches it on): queries come from `q_lora_rank` latents (or a
    plain projection when it is None) and keys/values from `kv_lora_rank` latents, each latent
    with its own RMSNorm; scores use `qk_nope_head_dim + qk_rope_head_dim` per head (the RoPE
    part of the key is one vector shared by all heads), values `v_head_dim`.
    """

    # Strict and finite: a shape given inline in a spec is user input (no bool or string taken for
    # a number); `aliases` stays lax so the catalogue's YAML lists become tuples.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=255)
    aliases: tuple[str, ...] = Field(default=(), strict=False)
    family: str = "custom"
    params_b: float | None = Field(default=None, gt=0)
    active_params_b: float | None = Field(default=None, gt=0)
    layers: int = Field(ge=1)
    hidden: int = Field(ge=1)
    ffn_hidden: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    vocab: int = Field(ge=1)
    gated_mlp: bool = True
    qkv_bias: bool = False
    tied_embeddings: bool = False
    max_seq_len: int | None = Field(default=None, ge=1)
    moe_experts: int | None = Field(default=None, ge=1)
    moe_top_k: int | None = Field(default=None, ge=1)
    moe_ffn_hidden: int | None = Field(default=None, ge=1)
    moe_shared_experts: int = Field(default=0, ge=0)
    moe_expert_bias: bool = False
    moe_shared_ffn_hidden: int | None = Field(default=None, ge=1)
    dense_layers: int = Field(default=0, ge=0)
    q_lora_rank: int | None = Field(default=None, ge=1)
    kv_lora_rank: int | None = Field(default=None, ge=1)
    qk_nope_head_dim: int | None = Field(default=None, ge=1)
    qk_rope_head_dim: int | None = Field(default=None, ge=1)
    v_head_dim: int | None = Field(default=None, ge=1)
    source: str = "given inline in the study spec"

    def __hash__(self) -> int:
        """Hash of a few fields: consistent with equality (equal models share them) and cheap,
        since memoised cost functions look models up once per candidate."""
        return hash((self.name, self.layers, self.hidden, self.ffn_hidden, self.heads))

    @model_validator(mode="after")
    def _shapes_agree(self) -> ModelSpec:
        if self.heads % self.kv_heads:
            raise ValueError(f"heads={self.heads} is not a multiple of kv_heads={self.kv_heads}")
        if self.kv_lora_rank is None and self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden={self.hidden} is not a multiple of heads={self.heads}")
        self._check_moe()
        self._check_mla()
        return self

    def _check_moe(self) -> None:
        if self.moe_experts is None:
            stray = [f for f in MOE_FIELDS if getattr(self, f) is not None]
            stray += [f for f in ("moe_shared_experts", "dense_layers", "moe_expert_bias") if getattr(self, f)]
            if stray:
                raise ValueError(f"{', '.join(stray)} set without moe_experts; MoE fields need moe_experts")
            return
        for field in ("moe_top_k", "moe_ffn_hidden"):
            if getattr(self, field) is None:
                raise ValueError(f"{field} is required when moe_experts={self.moe_experts} is set")
        if self.moe_top_k > self.moe_experts:
            raise ValueError(f"moe_top_k={self.moe_top_k} exceeds moe_experts={self.moe_experts}")
        if self.dense_layers >= self.layers:
            raise ValueError(f"dense_layers={self.dense_layers} leaves no MoE layer; allowed: 0..{self.layers - 1}")
        if self.moe_shared_ffn_hidden is not None and not self.moe_shared_experts:
            raise ValueError(f"moe_shared_ffn_hidden={self.moe_shared_ffn_hidden} is set but moe_shared_experts=0")

    def _check_mla(self) -> None:
        if self.kv_lora_rank is None:
            stray = [f for f in MLA_FIELDS if getattr(self, f) is not None]
            if stray:
                raise ValueError(f"{', '.join(stray)} set without kv_lora_rank; MLA fields need kv_lora_rank")
            return
        missing = [f for f in MLA_FIELDS[1:] if getattr(self, f) is None]
        if missing:
            raise ValueError(f"{', '.join(missing)} required when kv_lora_rank={self.kv_lora_rank} is set (MLA)")
        if self.kv_heads != self.heads:
            raise ValueError(
                f"MLA gives every head its own keys and values: kv_heads={self.kv_heads} must equal heads={self.heads}"
            )
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        if self.head_dim is not None and self.head_dim != qk:
            raise ValueError(f"head_dim={self.head_dim} differs from qk_nope_head_dim + qk_rope_head_dim={qk} (MLA)")
        if self.qkv_bias:
            raise ValueError("qkv_bias=true applies to standard attention; MLA projections have no biases")

    @property
    def is_moe(self) -> bool:
        return self.moe_experts is not None

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def d_head(self) -> int:
        """Per-head width of queries and keys (MLA: qk_nope_head_dim + qk_rope_head_dim)."""
        if self.is_mla:
            return self.qk_nope_head_dim + self.qk_rope_head_dim
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    @property
    def q_width(self) -> int:
        """Width of the query projection output (heads * head_dim)."""
        return self.heads * self.d_head

    @property
    def kv_width(self) -> int:
        """Width of one of the key/value projection outputs (kv_heads * head_dim); for MLA the
        keys after the up-projection (values are heads * v_head_dim wide)."""
        return self.kv_heads * self.d_head

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of width `ffn_hidden` in the MLP: gate, up, down (3) or up, down (2)."""
        return 3 if self.gated_mlp else 2

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return self.layers - self.dense_layers if self.is_moe else 0

    def is_moe_layer(self, index: int) -> bool:
        """Whether layer `index` (0-based) has an MoE MLP; the first `dense_layers` do not."""
        if not 0 <= index < self.layers:
            raise SpecError(f"layer_index={index} is outside {self.name}'s layers; allowed: 0..{self.layers - 1}")
        return self.is_moe and index >= self.dense_layers

    @property
    def layer_runs(self) -> tuple[tuple[int, int], ...]:
        """(first layer index, count) of each run of identical layers: one run for a dense or
        all-MoE model, two (dense, then MoE) for DeepSeek-style models."""
        runs = ((0, self.layers - self.moe_layers), (self.layers - self.moe_layers, self.moe_layers))
        return tuple(run for run in runs if run[1])

    @property
    def attention_params(self) -> int:
        """Weights of one attention block (projections, MLA latent norms, q/k/v biases)."""
        h = self.hidden
        if not self.is_mla:
            bias = self.q_width + 2 * self.kv_width if self.qkv_bias else 0
            return h * (2 * self.q_width + 2 * self.kv_width) + bias
        if self.q_lora_rank is None:
            query = h * self.q_width
        else:
            query = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.q_width
        key_value = (
            h * (self.kv_lora_rank + self.qk_rope_head_dim)
            + self.kv_lora_rank
            + self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
        )
        return query + key_value + self.heads * self.v_head_dim * h

    @property
    def expert_params(self) -> int:
        """Weights of one routed expert (0 for a dense model)."""
        return self.mlp_matrices * self.hidden * self.moe_ffn_hidden if self.is_moe else 0

    @property
    def shared_experts_ffn_hidden(self) -> int:
        """Total width of the shared experts: they act as one dense MLP this wide."""
        width = self.moe_shared_ffn_hidden if self.moe_shared_ffn_hidden is not None else self.moe_ffn_hidden
        return self.moe_shared_experts * width if self.moe_shared_experts else 0

    @property
    def router_params(self) -> int:
        """The router's hidden x moe_experts weights (0 for a dense model)."""
        return self.hidden * self.moe_experts if self.is_moe else 0

    @property
    def dense_layer_params(self) -> int:
        """Weights of a layer with a dense MLP: attention, MLP and its two norms."""
        return self.attention_params + self.mlp_matrices * self.hidden * self.ffn_hidden + 2 * self.hidden

    @property
    def moe_layer_params(self) -> int:
        """Weights of an MoE layer: attention, router, every expert, shared experts, two norms."""
        shared = self.mlp_matrices * self.hidden * self.shared_experts_ffn_hidden
        experts = self.moe_experts * self.expert_params if self.is_moe else 0
        return self.attention_params + self.router_params + experts + shared + 2 * self.hidden

    def layer_params(self, index: int) -> int:
        """Weights of layer `index` (0-based)."""
        return self.moe_layer_params if self.is_moe_layer(index) else self.dense_layer_params

    @property
    def params_per_layer(self) -> int:
        """Weights of one transformer layer, for models whose layers are all alike.

        Raises for models that mix dense and MoE layers (DeepSeek-V3), where no single number
        is right; use `layer_params(i)` there.
        """
        if len(self.layer_runs) > 1:
            raise SpecError(
                f"{self.name}: params_per_layer is undefined: layers 0..{self.dense_layers - 1} are dense "
                f"({self.dense_layer_params} weights each) and the other {self.moe_layers} MoE "
                f"({self.moe_layer_params}); use layer_params(i)"
            )
        return self.layer_params(0)

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def output_params(self) -> int:
        """The logit layer's own weights (0 when tied to the input embedding)."""
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    @property
    def total_params(self) -> int:
        layers = sum(count * self.layer_params(first) for first, count in self.layer_runs)
        return layers + self.embedding_params + self.output_params + self.hidden  # final norm

    @property
    def active_params(self) -> int:
        """Weights one token uses: all but the routed experts it is not sent to.

        Counts the whole embedding and output matrices, as Mistral's 12.9B for Mixtral-8x7B does;
        DeepSeek's 36.6-36.7B for DeepSeek-V3 leaves out the input embedding (see models.yaml).
        Equals `total_params` for a dense model.
        """
        unused = self.moe_layers * (self.moe_experts - self.moe_top_k) * self.expert_params if self.is_moe else 0
        return self.total_params - unused


@cache
def model_catalog() -> Registry[ModelSpec]:
    """All models of `models.yaml`, keyed by name and aliases."""
    return load_catalog(__package__, "models.yaml", ModelSpec, "model")


def get_model(name: str, field: str = "model") -> ModelSpec:
    """The zoo model called `name`; a CatalogError naming `field` if there is none."""
    return model_catalog().lookup(name, field)
