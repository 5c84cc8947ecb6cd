// Writes Cline's provider settings for the scripted model:
// DATA_DIR/settings/providers.json, provider openai-compatible at BASE_URL
// with MODEL (the key comes from OPENAI_API_KEY at launch, never the file).
// updatedAt is required: without it Cline resets the file to its cloud
// provider and hangs. Run by Cline's own binary in Bun mode:
//   BUN_BE_BUN=1 cline cline-setup.js DATA_DIR BASE_URL MODEL
const fs = require("fs");
const path = require("path");

const [dir, baseUrl, model] = process.argv.slice(2);
if (!dir || !baseUrl || !model) {
  console.error("usage: cline-setup.js DATA_DIR BASE_URL MODEL");
  process.exit(2);
}
const settings = path.join(dir, "settings");
fs.mkdirSync(settings, { recursive: true, mode: 0o700 });
const stored = {
  version: 1,
  lastUsedProvider: "openai-compatible",
  modes: {},
  providers: {
    "openai-compatible": {
      settings: { provider: "openai-compatible", baseUrl, model },
      updatedAt: new Date().toISOString(),
      tokenSource: "manual",
    },
  },
};
fs.writeFileSync(path.join(settings, "providers.json"), JSON.stringify(stored, null, 2) + "\n", { mode: 0o600 });
console.log("cline provider settings written to " + settings);
