"""What deploy/grafana/dashboard.py builds the dashboard from, with Grafana's typed builder
(grafana-foundation-sdk): PromQL building blocks, a function per kind of panel that gives every
panel of that kind one look, and the JSON encoding.

A panel function takes what needs several SDK calls (queries, thresholds, bars); a declaration
chains the SDK's own setters for the rest: `.unit("s")`, `.decimals(2)`, `.min(0)`, `.span(8)`
(the width, of 24 columns), `.height(4)`, `.mappings(value_map(...))`.
"""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from typing import Any, TypeVar

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.stat import Panel as Stat
from grafana_foundation_sdk.builders.statetimeline import Panel as StateTimeline
from grafana_foundation_sdk.builders.table import Panel as Table
from grafana_foundation_sdk.builders.timeseries import Panel as TimeSeries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

# The datasource provisioning/datasources/prometheus.yaml creates, by its fixed uid.
DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="trader-prometheus")
RED, AMBER, GREEN = "red", "orange", "green"
LINE_AND_AREA = cm.GraphTresholdsStyleMode.LINE_AND_AREA
STACKED, UNSTACKED = cm.StackingMode.NORMAL, cm.StackingMode.NONE
DESCENDING = cm.SortOrder.DESCENDING
Steps = Sequence[tuple[float, str]]  # thresholds above the green base: (from value, colour)

# Every selector is scoped to the trader job and the chosen instance.
SCOPE = 'job="trader", instance=~"$instance"'
SYMBOLS = 'symbol=~"$symbol"'


def sel(metric: str, *matchers: str) -> str:
    return f"{metric}{{{', '.join((SCOPE, *matchers))}}}"


def match(label: str, value: str, op: str = "=") -> str:
    return f'{label}{op}"{value}"'


def per_hour(metric: str, *matchers: str, by: str = "") -> str:
    """A counter's increase over the last hour, summed (by the labels in `by`)."""
    total = f"sum by ({by}) " if by else "sum"
    return f"{total}(increase({sel(metric, *matchers)}[1h]))"


def quantile(q: float, histogram: str, by: str = "", window: str = "$window") -> str:
    """The q-quantile of a histogram over the dashboard's window, or the one given (ticks are
    sparse: one per bar, so a short rate window would mostly be empty)."""
    labels = f"{by}, le" if by else "le"
    return (
        f"histogram_quantile({q}, sum by ({labels}) (rate({sel(histogram + '_bucket')}[{window}])))"
    )


def query(expr: str, legend: str = "__auto") -> Dataquery:
    return Dataquery().expr(expr).legend_format(legend).datasource(DATASOURCE).range()


def value_map(*entries: tuple[str, str, str]) -> list[dm.ValueMapping]:
    """Value mappings: (value, text, colour)."""
    results = {
        value: dm.ValueMappingResult(text=text, color=color, index=i)
        for i, (value, text, color) in enumerate(entries)
    }
    return [dm.ValueMap(options=results)]


P = TypeVar("P", Stat, TimeSeries, Table, StateTimeline)


def panel(
    builder: P,
    title: str,
    description: str,
    *queries: Dataquery,
    steps: Steps = (),
    base: str = GREEN,
) -> P:
    """What every panel sets: datasource, targets A, B, ..., thresholds (from the `base` colour
    up) and field defaults."""
    for ref_id, target in zip(string.ascii_uppercase, queries, strict=False):
        builder.with_target(target.ref_id(ref_id))
    bottom = [dm.Threshold(None, base)]
    above = [dm.Threshold(value, color) for value, color in steps]
    return (
        builder.title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit("short")
        .mappings([])
        .thresholds(db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(bottom + above))
    )


def stat(
    title: str,
    description: str,
    expr: str,
    *,
    thresholds: Steps = (),
    base: str = GREEN,
    legend: str = "__auto",
) -> Stat:
    """The latest value (one box per series, named by `legend`), 3 wide, on a background
    coloured by its thresholds or mappings; `base` colours what lies below the first threshold
    (red for a figure that is bad when low)."""
    target = query(expr, legend).instant()
    return (
        panel(Stat(), title, description, target, steps=thresholds, base=base)
        .span(3)
        .height(4)
        .color_scheme(db.FieldColor().mode(dm.FieldColorModeId.THRESHOLDS))
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False))
        .color_mode(cm.BigValueColorMode.BACKGROUND)
        .graph_mode(cm.BigValueGraphMode.NONE)
        .justify_mode(cm.BigValueJustifyMode.CENTER)
        .orientation(cm.VizOrientation.AUTO)
        .text_mode(cm.BigValueTextMode.VALUE)
    )


def timeseries(
    title: str, description: str, *queries: Dataquery, bars: bool = False, thresholds: Steps = ()
) -> TimeSeries:
    """12 wide: lines, or stacked bars (counts per hour), and thresholds drawn as lines and areas;
    a table legend with each series' last and highest value."""
    builder = panel(TimeSeries(), title, description, *queries, steps=thresholds)
    if thresholds:
        builder.thresholds_style(cb.GraphThresholdsStyleConfig().mode(LINE_AND_AREA))
    legend = cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.TABLE).show_legend(True)
    return (
        builder.span(12)
        .height(8)
        .color_scheme(db.FieldColor().mode(dm.FieldColorModeId.PALETTE_CLASSIC))
        .draw_style(cm.GraphDrawStyle.BARS if bars else cm.GraphDrawStyle.LINE)
        .line_width(1)
        .fill_opacity(60 if bars else 10)
        .show_points(cm.VisibilityMode.NEVER)
        .span_nulls(False)
        .stacking(cb.StackingConfig().mode(STACKED if bars else UNSTACKED).group("A"))
        .legend(legend.placement(cm.LegendPlacement.BOTTOM).calcs(["lastNotNull", "max"]))
        .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(DESCENDING))
    )


def on_right_axis(unit: str) -> list[dm.DynamicConfigValue]:
    """Override properties: a series in its own unit, on an axis on the right."""
    return [
        dm.DynamicConfigValue(id_val="unit", value=unit),
        dm.DynamicConfigValue(id_val="custom.axisPlacement", value="right"),
    ]


def table(title: str, description: str, expr: str) -> Table:
    """The labels of one instant query's series, less the columns that every series has."""
    target = query(expr).instant().format(PromQueryFormat.TABLE)
    builder = panel(Table(), title, description, target)
    # table.Panel has no setters for the table's per-field options: set them on its model.
    cells = cb.TableFieldOptions().align(cm.FieldTextAlignment.AUTO)
    builder.build().field_config.defaults.custom = cells.cell_options(
        cm.TableColorTextCellOptions()
    ).build()
    hidden = dict.fromkeys(["Time", "Value", "__name__", "job"], True)
    organize = dm.DataTransformerConfig(id_val="organize", options={"excludeByName": hidden})
    return (
        builder.color_scheme(db.FieldColor().mode(dm.FieldColorModeId.THRESHOLDS))
        .transformations([organize])
        .show_header(True)
        .cell_height(cm.TableCellHeight.SM)
    )


def state_timeline(title: str, description: str, target: Dataquery) -> StateTimeline:
    """A state over time, 8 wide: one coloured band per value (give it mappings)."""
    legend = cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.LIST).show_legend(True)
    tooltip = cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.SINGLE)
    return (
        panel(StateTimeline(), title, description, target)
        .span(8)
        .height(8)
        .color_scheme(db.FieldColor().mode(dm.FieldColorModeId.PALETTE_CLASSIC))
        .show_value(cm.VisibilityMode.AUTO)
        .merge_values(True)
        .row_height(0.9)
        .align_value(cm.TimelineValueAlignment.LEFT)
        .legend(legend.placement(cm.LegendPlacement.BOTTOM))
        .tooltip(tooltip.sort(cm.SortOrder.NONE))
        .fill_opacity(80)
        .line_width(0)
    )


def to_json(dashboard: dm.Dashboard) -> str:
    """The SDK's model as JSON, plus what the SDK (Grafana 10.1's schema) has no field for."""
    data: dict[str, Any] = json.loads(json.dumps(dashboard, cls=JSONEncoder))
    data["annotations"]["list"][0]["builtIn"] = 1  # Grafana's own annotations & alerts
    for variable in data["templating"]["list"]:
        if variable["type"] == "query":
            variable["definition"] = variable["query"]  # what the variable editor shows
    for item in data["panels"]:
        if item["type"] == "stat":
            item["options"]["wideLayout"] = True  # newer than the SDK's stat.Options
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
