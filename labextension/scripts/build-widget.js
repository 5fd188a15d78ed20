// Builds the report widget's front end (npm run build:widget): src/widget.ts and what it imports
// (report.ts, dom.ts, highlight.ts, types.ts: the MIME renderer's own code) bundled into one
// self-contained ES module, and style/report.css, the renderer's stylesheet. Both go into the
// Python package (xlanb/notebook/static/), which loads them as the anywidget's _esm and _css.
// esbuild runs offline; it only reads files. A JupyterLab or Lumino module in the bundle is an
// error: the widget also runs in Colab, VS Code and the classic notebook.
const path = require('path');
const esbuild = require('esbuild');

const root = path.resolve(__dirname, '..');
const out = path.resolve(root, '..', 'xlanb', 'notebook', 'static');
const banner = '/* xlanb report widget: built from labextension/src/widget.ts by `npm run build:widget`; do not edit */';

const forbidJupyter = {
  name: 'forbid-jupyter',
  setup(build) {
    build.onResolve({ filter: /^@(jupyterlab|jupyter|lumino)\// }, args => ({
      errors: [{ text: `${args.path} (imported by ${path.relative(root, args.importer)}) cannot be in the widget bundle` }]
    }));
  }
};

const common = { bundle: true, minify: true, legalComments: 'none', logLevel: 'warning', banner: { js: banner, css: banner } };

Promise.all([
  esbuild.build({
    ...common,
    entryPoints: [path.join(root, 'src', 'widget.ts')],
    outfile: path.join(out, 'widget.js'),
    format: 'esm',
    target: 'es2020',
    platform: 'browser',
    plugins: [forbidJupyter]
  }),
  esbuild.build({
    ...common,
    entryPoints: [path.join(root, 'style', 'report.css')],
    outfile: path.join(out, 'widget.css')
  })
]).then(
  () => console.log(`built ${path.relative(process.cwd(), out)}/widget.js and widget.css`),
  () => process.exit(1)
);
