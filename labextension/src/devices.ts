/**
 * The report's devices section (schema 1.3, docs/sharding.md): for each graph that ran on several
 * devices, its inputs' and outputs' shardings after propagation (words and tile pictures), the
 * collectives the SPMD partitioner inserted, and memory per device; and the DeviceLoader's waits.
 */

import { formatBytes, formatMs, h, svgBox, table } from './dom';

export interface IShardingPicture {
  index: number;
  type: string;
  text: string;
  hlo?: string;
  picture: string;
  svg: string;
}

export interface ICollective {
  op: string;
  type: string;
  bytes: number;
  groups: string;
  hlo?: string;
}

export interface IGraphSharding {
  name: string;
  key: string;
  devices: number;
  mesh?: string;
  inputs: IShardingPicture[];
  outputs: IShardingPicture[];
  collectives: ICollective[];
  memory?: Record<string, number>;
}

export interface IDevices {
  graphs: IGraphSharding[];
  loader: { steps: number; wait_ms: number[]; uploads: number; upload_bytes: number } | null;
}

function memoryText(memory: Record<string, number> | undefined): string {
  if (!memory) {
    return '';
  }
  return ['argument', 'output', 'temp']
    .filter(k => memory[`${k}_size_in_bytes`] !== undefined)
    .map(k => `${k} ${formatBytes(memory[`${k}_size_in_bytes`])}`)
    .join(', ');
}

function pictureCell(p: IShardingPicture, trusted: boolean): Node | string {
  if (!p.svg) {
    return '';
  }
  const box = svgBox(p.svg, trusted, 'xl-svg xl-tiles');
  box.title = p.picture;
  return box;
}

function graphSharding(g: IGraphSharding, trusted: boolean): HTMLElement {
  const mem = memoryText(g.memory);
  const rows: (Node | string | number)[][] = [];
  for (const [title, items] of [
    ['input', g.inputs],
    ['output', g.outputs]
  ] as [string, IShardingPicture[]][]) {
    for (const p of items) {
      rows.push([`${title} ${p.index}`, p.type, p.text, pictureCell(p, trusted)]);
    }
  }
  const collectives = g.collectives.length
    ? table(
        ['collective', 'type', 'size', 'replica groups'],
        g.collectives.map(c => [c.op, c.type, formatBytes(c.bytes), c.groups])
      )
    : h('p', { text: 'no collectives' });
  return h(
    'details',
    { class: 'xl-devices-graph', open: true },
    h('summary', {}, `graph ${g.name} on ${g.devices} devices${g.mesh ? ` (${g.mesh})` : ''}` + (mem ? ` · per device: ${mem}` : '')),
    h('div', { class: 'xl-scrollx' }, table(['', 'type', 'sharding after propagation', 'tiles'], rows)),
    collectives
  );
}

/** The devices section, or null when the report has none. */
export function devicesSection(d: IDevices | null | undefined, trusted: boolean): HTMLElement | null {
  if (!d || (!d.graphs.length && !d.loader)) {
    return null;
  }
  const box = h('details', { class: 'xl-devices' }, h('summary', {}, `devices (${d.graphs.length} partitioned)`));
  for (const g of d.graphs) {
    box.append(graphSharding(g, trusted));
  }
  if (d.loader) {
    const waits = d.loader.wait_ms.slice(0, 24).map(formatMs).join(', ');
    box.append(
      h('p', {
        text: `DeviceLoader: ${d.loader.uploads} batches uploaded (${formatBytes(d.loader.upload_bytes)}); host waited per step: ${waits}`
      })
    );
  }
  return box;
}
