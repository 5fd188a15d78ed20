/**
 * xlanb-lab: the XLA sidebar and the status bar item. The report renderer is the package's
 * mimeExtension (mime.ts).
 */

import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { MainAreaWidget } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';

import { XlaModel } from './model';
import { SIDEBAR_ID, XlaSidebar, xlaIcon } from './sidebar';
import { GraphView } from './graphview';
import { STATUS_ID, XlaStatus } from './status';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'xlanb-lab:plugin',
  description: 'The XLA sidebar and status bar item for notebooks running xlanb.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabShell, IStatusBar],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    labShell: ILabShell | null,
    statusBar: IStatusBar | null
  ) => {
    const model = new XlaModel(tracker);
    let views = 0;
    const sidebar = new XlaSidebar(model, entry => {
      const view = new MainAreaWidget({ content: new GraphView(entry) });
      view.id = `xlanb-graph-${++views}`;
      view.title.label = `XLA graph ${entry.name}`;
      view.title.icon = xlaIcon;
      view.title.closable = true;
      app.shell.add(view, 'main', { mode: 'split-right' });
    });
    app.shell.add(sidebar, 'left', { rank: 650 });
    if (statusBar) {
      const item = new XlaStatus(model, () => app.shell.activateById(SIDEBAR_ID));
      statusBar.registerStatusItem(STATUS_ID, {
        item,
        align: 'left',
        rank: 5,
        isActive: () => tracker.currentWidget !== null,
        activeStateChanged: model.changed
      });
    }
    labShell?.currentChanged.connect(() => model.refresh());
  }
};

export default plugin;
