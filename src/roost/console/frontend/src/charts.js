// Small time-series charts through uPlot (bundled from npm; no CDN). Times are Unix seconds.
// uPlot is most of the console's script, so this module is a chunk of its own that a page with
// charts loads (util.js loadCharts) once its tables are filled; it imports nothing of the
// console's other modules, so the main script shares no chunk with it and loads as one file.
import uPlot from "uplot";

// Whole seconds and up: uPlot's own time ticks go down to milliseconds, which over a short span
// read as ":12.700 :12.800".
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];

// Byte figures' ticks: 1, 2 and 5 times a power of 1024 (so "4 KiB/s", not "4.9 KiB/s").
export const BYTE_STEPS = [0, 1, 2, 3, 4, 5].flatMap((power) => [1, 2, 5, 10, 20, 50, 100, 200, 500].map((m) => m * 1024 ** power));

// `clock` writes a time (ms) as the time axis shows it; `format` writes a value (ticks, legend);
// `steps` are the value axis' allowed tick increments.
export function lineChart(container, label, clock, format = (v) => String(Math.round(v * 10) / 10), steps = undefined) {
  let plot = null;
  return (series) => {
    const data = [series.t || [], series.v || []];
    const width = Math.max(300, container.clientWidth - 4);
    if (plot === null) {
      plot = new uPlot({
        width, height: 180,
        series: [{ value: (u, t) => (t === null ? "—" : clock(t * 1000)) },
          { label, stroke: "#2563eb", width: 2, fill: "rgba(37,99,235,0.08)",
            value: (u, v) => (v === null ? "—" : format(v)) }],
        scales: { y: { range: (u, low, high) => [0, Math.max(1, high * 1.1)] } },
        axes: [{ stroke: "#888", incrs: TIME_STEPS, space: 70, values: (u, ticks) => ticks.map((t) => clock(t * 1000)) },
          { stroke: "#888", size: 70, incrs: steps, values: (u, ticks) => ticks.map(format) }],
        // The heading names the figure; a legend would show only "—" until hovered.
        legend: { show: false },
      }, data, container);
    } else {
      plot.setData(data);
    }
  };
}
