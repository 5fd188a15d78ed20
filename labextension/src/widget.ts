/**
 * The report widget's front end (anywidget): the MIME renderer's report (report.ts) drawn in the
 * widget's element, and drawn again whenever the kernel sends a new `report`. It imports no
 * JupyterLab module, so the same renderer serves Colab, VS Code and the classic notebook.
 * scripts/build-widget.js bundles it into xlanb/notebook/static/widget.js (the widget's _esm).
 */

import { renderReport } from './report';

/** The part of anywidget's model this widget uses. */
export interface IWidgetModel {
  get(name: 'report'): unknown;
  on(event: 'change:report', callback: () => void): void;
  off(event: 'change:report', callback: () => void): void;
}

/**
 * Draws the report into `el`; the returned function stops following changes. The widget's
 * state comes from the kernel that made the report, so its SVGs are inlined (trusted).
 */
function render({ model, el }: { model: IWidgetModel; el: HTMLElement }): () => void {
  el.classList.add('xlanb-widget'); // as mime.ts marks its output 'xlanb-lab-output'
  const draw = () => el.replaceChildren(renderReport(model.get('report'), { trusted: true }));
  draw();
  model.on('change:report', draw);
  return () => model.off('change:report', draw);
}

export default { render };
