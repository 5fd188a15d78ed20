/**
 * The MIME renderer for application/vnd.xlanb.report+json.
 *
 * Its rank (-20) is below the widget manager's (-10), so in JupyterLab the report renders here
 * rather than through the anywidget view that the same display also carries: this renderer needs
 * no comm, so it also works in a reopened notebook and after the kernel is gone. It is `safe`:
 * in an untrusted notebook it inlines no markup from the report (SVG goes through <img>).
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

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

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [REPORT_MIME],
  defaultRank: -20,
  createRenderer: () => new ReportRenderer()
};

const extension: IRenderMime.IExtension = {
  id: 'xlanb-lab:report-renderer',
  description: 'Renders the xlanb cell report (application/vnd.xlanb.report+json).',
  rendererFactory,
  rank: -20,
  dataType: 'json'
};

export default extension;
