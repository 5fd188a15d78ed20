/**
 * The MIME renderers: the cell report (application/vnd.xlanb.report+json) and the live phase of
 * a long compile or run (application/vnd.xlanb.phase+json).
 *
 * The report's rank (-20) is below the widget manager's (-10), so in JupyterLab the report renders
 * here rather than through the anywidget view that the same display also carries: this renderer
 * needs no comm, so it also works in a reopened notebook and after the kernel is gone. The phase
 * has the same rank, ahead of the text/html its bundle also carries. Both are `safe`: in an
 * untrusted notebook they inline no markup from the data (the report's SVG goes through <img>;
 * the phase is text only).
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { PHASE_MIME, renderPhase } from './phase';
import { renderReport } from './report';
import { REPORT_MIME } from './types';

export class ReportRenderer extends Widget implements IRenderMime.IRenderer {
  constructor() {
    super();
    this.addClass('xlanb-lab-output');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[REPORT_MIME];
    this.node.replaceChildren(renderReport(data, { trusted: model.trusted }));
    return Promise.resolve();
  }
}

/** Drawn again on each update_display_data: renderPhase keeps its elements (and the bar's animation). */
export class PhaseRenderer extends Widget implements IRenderMime.IRenderer {
  constructor() {
    super();
    this.addClass('xlanb-lab-output');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    renderPhase(this.node, model.data[PHASE_MIME]);
    return Promise.resolve();
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [REPORT_MIME],
  defaultRank: -20,
  createRenderer: () => new ReportRenderer()
};

export const phaseRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [PHASE_MIME],
  defaultRank: -20,
  createRenderer: () => new PhaseRenderer()
};

const extensions: IRenderMime.IExtension[] = [
  {
    id: 'xlanb-lab:report-renderer',
    description: 'Renders the xlanb cell report (application/vnd.xlanb.report+json).',
    rendererFactory,
    rank: -20,
    dataType: 'json'
  },
  {
    id: 'xlanb-lab:phase-renderer',
    description: 'Renders the live phase of a long xlanb compile or run (application/vnd.xlanb.phase+json).',
    rendererFactory: phaseRendererFactory,
    rank: -20,
    dataType: 'json'
  }
];

export default extensions;
