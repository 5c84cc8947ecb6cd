// Writes OpenCode's config for the scripted model into CONFIG_DIR
// ($XDG_CONFIG_HOME/opencode), and pre-seeds node_modules/ and a
// package-lock.json listing @opencode-ai/plugin there, so OpenCode skips
// the background `npm install` it starts in every config dir (which would
// reach the network from inside the sandbox). Run by OpenCode's own binary
// in Bun mode:
//   BUN_BE_BUN=1 opencode opencode-setup.js CONFIG_DIR BASE_URL MODEL API_KEY_ENV
const fs = require("fs");
const path = require("path");

const [dir, baseURL, model, apiKeyEnv] = process.argv.slice(2);
if (!dir || !baseURL || !model || !apiKeyEnv) {
  console.error("usage: opencode-setup.js CONFIG_DIR BASE_URL MODEL API_KEY_ENV");
  process.exit(2);
}
fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
const config = {
  $schema: "https://opencode.ai/config.json",
  provider: {
    fake: {
      npm: "@ai-sdk/openai-compatible",
      name: "fake",
      options: { baseURL, apiKey: "{env:" + apiKeyEnv + "}" },
      models: { [model]: { name: model, tool_call: true, limit: { context: 128000, output: 4096 } } },
    },
  },
  model: "fake/" + model,
  small_model: "fake/" + model,
  autoupdate: false,
  share: "disabled",
  permission: { "*": "allow", external_directory: "allow" },
};
const write = (name, value) =>
  fs.writeFileSync(path.join(dir, name), JSON.stringify(value, null, 2) + "\n", { mode: 0o600 });
write("opencode.json", config);
const deps = { "@opencode-ai/plugin": "*" };
write("package.json", { dependencies: deps });
write("package-lock.json", {
  name: "opencode-config",
  lockfileVersion: 3,
  requires: true,
  packages: { "": { dependencies: deps }, "node_modules/@opencode-ai/plugin": { version: "0.0.0" } },
});
const plugin = path.join(dir, "node_modules", "@opencode-ai", "plugin");
fs.mkdirSync(plugin, { recursive: true });
fs.writeFileSync(path.join(plugin, "package.json"), JSON.stringify({ name: "@opencode-ai/plugin", version: "0.0.0" }) + "\n");
console.log("opencode config written to " + dir);
