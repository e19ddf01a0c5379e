import CurlewCLI

// The whole tool lives in the CurlewCLI target, where the tests can reach it.
await CurlewCommand.runFromCommandLine()
