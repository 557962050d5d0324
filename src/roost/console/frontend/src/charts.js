// Small time-series charts through uPlot (bundled from npm; no CDN).
import uPlot from "uplot";

export function lineChart(container, label) {
  let plot = null;
  return (series) => {
    const data = [series.t || [], series.v || []];
    const width = Math.max(300, container.clientWidth - 4);
    if (plot === null) {
      plot = new uPlot({
        width, height: 180,
        series: [{}, { label, stroke: "#2563eb", width: 2, fill: "rgba(37,99,235,0.08)" }],
        axes: [{ stroke: "#888" }, { stroke: "#888" }],
        legend: { show: true },
      }, data, container);
    } else {
      plot.setData(data);
    }
  };
}
