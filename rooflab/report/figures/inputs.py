"""What a figure draws from: the aggregate, the derived tables and the GPU the figures show."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rooflab.report.analysis import PLAIN_TIMING
from rooflab.report.derive import select
from rooflab.report.figures.style import plain
from rooflab.report.load import Aggregate


@dataclass
class FigureData:
    agg: Aggregate
    tables: dict              # the derived tables (rooflab.report.derive)
    gpu: str | None           # the GPU the per-study figures show

    def cases(self, study: str) -> pd.DataFrame:
        """This GPU's rows of a study with only the study's columns, each case in the timing that judges it."""
        frame = self.tables["cases"]
        empty = self.agg.study(study).iloc[0:0]
        part = frame[(frame["study"] == study) & (frame["gpu"] == self.gpu)]
        return pd.concat([empty, part], ignore_index=True)[empty.columns] if len(part) else empty

    def compared(self, study: str, against: str) -> pd.DataFrame:
        """This GPU's comparisons of ours against a group or an implementation (rooflab.report.derive.select)."""
        return select(self.tables["comparisons"], study, against, self.gpu)

    def rows(self, study: str, timing: str | None = PLAIN_TIMING) -> pd.DataFrame:
        frame = self.agg.study(study)
        frame = frame[frame["gpu"] == self.gpu]
        return frame if timing is None else frame[frame["timing"] == timing]

    def ceiling(self, name: str) -> float | None:
        return self.agg.ceiling(self.gpu).get(name) if self.gpu else None

    def ceiling_of(self, rows: pd.DataFrame) -> tuple[str | None, float | None]:
        """(name, value) of the measured ceiling the rows say they are judged against (their ceiling_name)."""
        names = rows["ceiling_name"].dropna()
        if names.empty:
            return None, None
        name = str(names.mode().iloc[0])
        return name, self.ceiling(name)

    @property
    def label(self) -> str:
        return self.label_of(self.gpu)

    def label_of(self, gpu: str | None) -> str:
        """A GPU's name as its env.json records it (else its folder's), as figure text."""
        return plain(self.agg.envs.get(gpu, {}).get("gpu") or gpu)
