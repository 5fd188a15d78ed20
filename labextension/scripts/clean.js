// Removes the TypeScript output, the built extension and the widget's bundle (npm run clean).
const fs = require('fs');
const path = require('path');
const root = path.resolve(__dirname, '..');
const widget = path.join('..', 'xlanb', 'notebook', 'static'); // scripts/build-widget.js writes it
for (const dir of ['lib', require('../package.json').jupyterlab.outputDir, widget]) {
  fs.rmSync(path.resolve(root, dir), { recursive: true, force: true });
}
