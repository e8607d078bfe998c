import { removeTempDirs } from './temp';

// Every test file leaves /tmp as it found it: data dirs, embedded clusters' files and all.
afterAll(removeTempDirs);
