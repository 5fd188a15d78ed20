import './report.css';
import './phase.css';
import './base.css';
