"""The model zoo: transformer shapes, validated at load, and their parameter counts."""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulators._registry import Registry, load_catalog


class ModelSpec(BaseModel):
    """A decoder-only transformer (dense; GQA and gated MLPs allowed).

    `ffn_hidden` is the width of each gate/up projection when `gated_mlp` is true (SwiGLU).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    aliases: tuple[str, ...] = ()
    family: str = "custom"
    params_b: float | None = Field(default=None, gt=0)
    layers: int = Field(ge=1)
    hidden: int = Field(ge=1)
    ffn_hidden: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    vocab: int = Field(ge=1)
    gated_mlp: bool = True
    tied_embeddings: bool = False
    max_seq_len: int | None = Field(default=None, ge=1)
    source: str = "given inline in the study spec"

    @model_validator(mode="after")
    def _shapes_agree(self) -> ModelSpec:
        if self.heads % self.kv_heads:
            raise ValueError(f"heads={self.heads} is not a multiple of kv_heads={self.kv_heads}")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden={self.hidden} is not a multiple of heads={self.heads}")
        return self

    @property
    def d_head(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    @property
    def q_width(self) -> int:
        """Width of the query projection output (heads * head_dim)."""
        return self.heads * self.d_head

    @property
    def kv_width(self) -> int:
        """Width of one of the key/value projection outputs (kv_heads * head_dim)."""
        return self.kv_heads * self.d_head

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of width `ffn_hidden` in the MLP: gate, up, down (3) or up, down (2)."""
        return 3 if self.gated_mlp else 2

    @property
    def params_per_layer(self) -> int:
        """Weights of one transformer layer: attention, MLP and its two norms (no biases)."""
        h = self.hidden
        attention = h * (2 * self.q_width + 2 * self.kv_width)
        mlp = self.mlp_matrices * h * self.ffn_hidden
        return attention + mlp + 2 * h

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def output_params(self) -> int:
        """The logit layer's own weights (0 when tied to the input embedding)."""
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    @property
    def total_params(self) -> int:
        return (
            self.layers * self.params_per_layer + self.embedding_params + self.output_params + self.hidden  # final norm
        )


@cache
def model_catalog() -> Registry[ModelSpec]:
    """All models of `models.yaml`, keyed by name and aliases."""
    return load_catalog(__package__, "models.yaml", ModelSpec, "model")


def get_model(name: str, field: str = "model") -> ModelSpec:
    """The zoo model called `name`; a CatalogError naming `field` if there is none."""
    return model_catalog().lookup(name, field)
