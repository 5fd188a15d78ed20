import './report.css';
import './base.css';
