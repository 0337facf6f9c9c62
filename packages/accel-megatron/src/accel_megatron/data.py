"""``MegatronLMDummyDataLoader``: megatron-core GPT datasets (indexed ``.bin``/``.idx`` files) as data loaders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from megatron.core.datasets.blended_megatron_dataset_builder import TopLevelDataset

SPLITS = ("train", "valid", "test")


@dataclass
class _Tokenizer:
    """What megatron-core's GPT dataset needs of a tokenizer: the vocabulary size and end-of-document id."""

    vocab_size: int | None
    eod: int

    @property
    def unique_identifiers(self) -> dict[str, object]:
        """What megatron-core hashes to name its index caches."""
        return {
            "class": "accel_megatron.data._Tokenizer",
            "vocab_size": self.vocab_size,
            "eod": self.eod,
        }


class MegatronLMDummyDataLoader:
    """Stands for megatron-core's GPT train/valid/test datasets until ``accelerator.prepare``.

    Pass the same object up to three times to ``prepare``: its first, second and third
    occurrences become the train, validation and test data loaders (micro-batches of
    ``micro_batch_size`` sequences, sharded over the data-parallel group). The data is
    Megatron-LM's preprocessed corpus: ``data_path`` gives the prefix(es) of indexed
    ``.bin``/``.idx`` files (optionally preceded by weights: ``["0.3", "a", "0.7", "b"]``),
    ``splits_string`` the train/valid/test proportions, ``eod_token_id`` the token
    separating documents.
    """

    def __init__(
        self,
        data_path: str | list[str],
        seq_length: int,
        micro_batch_size: int,
        eod_token_id: int,
        num_samples: tuple[int, int, int] = (1000, 100, 0),
        splits_string: str = "969,30,1",
        vocab_size: int | None = None,
        seed: int = 1234,
        path_to_cache: str | None = None,
        reset_position_ids: bool = False,
        reset_attention_mask: bool = False,
        eod_mask_loss: bool = False,
    ):
        paths = [data_path] if isinstance(data_path, str) else list(data_path)
        if not paths:
            raise ValueError("MegatronLMDummyDataLoader needs data_path (indexed dataset prefixes)")
        if len(num_samples) != 3 or any(int(n) < 0 for n in num_samples):
            raise ValueError(
                "MegatronLMDummyDataLoader: num_samples is (train, valid, test) sample counts >= 0"
            )
        if int(micro_batch_size) < 1 or int(seq_length) < 1:
            raise ValueError(
                "MegatronLMDummyDataLoader: micro_batch_size and seq_length must be >= 1"
            )
        self.data_path = paths
        self.seq_length = int(seq_length)
        self.micro_batch_size = int(micro_batch_size)
        self.num_samples = tuple(int(n) for n in num_samples)
        self.splits_string = splits_string
        self.tokenizer = _Tokenizer(vocab_size, int(eod_token_id))
        self.seed = int(seed)
        self.path_to_cache = path_to_cache
        self.reset_position_ids = reset_position_ids
        self.reset_attention_mask = reset_attention_mask
        self.eod_mask_loss = eod_mask_loss
        self._datasets: list[TopLevelDataset | None] | None = None

    def _blend(self) -> tuple[list[str], list[float] | None]:
        paths = self.data_path
        if len(paths) > 1 and len(paths) % 2 == 0:
            try:
                weights = [float(w) for w in paths[0::2]]
            except ValueError:
                return paths, None
            return paths[1::2], weights
        return paths, None

    def datasets(self) -> list[TopLevelDataset | None]:
        """The train, validation and test datasets (None where a split is empty); built once, on every rank."""
        if self._datasets is None:
            from megatron.core.datasets.blended_megatron_dataset_builder import (
                BlendedMegatronDatasetBuilder,
            )
            from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

            config = GPTDatasetConfig(
                random_seed=self.seed,
                sequence_length=self.seq_length,
                blend=self._blend(),
                split=self.splits_string,
                path_to_cache=self.path_to_cache,
                # an adapter with the members GPTDataset reads of megatron's tokenizer base
                tokenizer=self.tokenizer,  # ty: ignore[invalid-argument-type]
                reset_position_ids=self.reset_position_ids,
                reset_attention_mask=self.reset_attention_mask,
                eod_mask_loss=self.eod_mask_loss,
            )
            self._datasets = BlendedMegatronDatasetBuilder(
                GPTDataset, list(self.num_samples), lambda: True, config
            ).build()
        return self._datasets

    def data_loader(self, split: int) -> torch.utils.data.DataLoader | None:
        """A torch DataLoader over split ``split`` (0 train, 1 valid, 2 test), or None when it is empty."""
        import torch

        dataset = self.datasets()[split]
        if dataset is None or len(dataset) == 0:
            return None
        return torch.utils.data.DataLoader(
            dataset, batch_size=self.micro_batch_size, shuffle=False, drop_last=True
        )
